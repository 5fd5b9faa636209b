"""benchmarks/decode_ratio_composed.py: a ratio measured in one call times later calls' speed-ups, by hand."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from decode_ratio_composed import main  # noqa: E402


def _row(prefix, triton, flashinfer=None):
    c = {"prefix_tokens": prefix, "group_size": 8, "n_groups": 1, "suffix_tokens": 128, "q_per_kv": 2,
         "num_kv_heads": 4, "head_dim": 256, "kv_dtype": "bf16", "page_size": 16}
    return {"config": c, "triton": {"shared_table": {k: {"median_s": v} for k, v in triton.items()}},
            "flashinfer": {"shared_table": flashinfer or {}}}


def test_a_measured_ratio_times_each_later_speed_up(tmp_path, capsys):
    base = tmp_path / "base.json"
    base.write_text(json.dumps({"rows": [_row(4096, {"default": 40e-6}, {"cc": 32e-6, "tc": 36e-6}),
                                         _row(1024, {"default": 20e-6}, {"cc": 25e-6})]}))
    later = tmp_path / "later.json"      # the 4K row 50 / 38 = 1.316x faster under "new"; the 1K row not timed there
    later.write_text(json.dumps({"rows": [_row(4096, {"default": 50e-6, "new": 38e-6})]}))
    main([str(base), f"{later}:default:new"])
    out = capsys.readouterr().out
    # measured: 32 / 40 = 0.80 and 25 / 20 = 1.25; composed: 0.80 x 1.316 = 1.05 and 1.25 x 1.0
    assert "shared       2      1.02   0.80      1             1.15   1.05      2" in out
    assert "P=" not in out.split("composed  measured")[1]      # no composed row below 1.0
    main([str(base), f"{later}:new:default"])                   # the other way round: 0.80 x 0.76 = 0.61
    assert "    0.61      0.80  0.76  shared P=4096" in capsys.readouterr().out
