"""benchmarks/filled_launch_check.py: the planner's rule for the batch-filled launch against GPU rows (here rows made
from the shipped fit itself, which the check must find at 1.0, with ratios that follow whole tiles in the launch)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from cascade_plan.calibration.calibration_file import find_committed
from cascade_plan.calibration.fitting import predict_kind
from cascade_plan.inputs.hardware import load_hardware

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from filled_launch_check import compare, context_ratios, main  # noqa: E402


def _rows(probe):
    fits = probe.fits.kv_dtypes["fp8"]["triton"]
    rows = []
    for p, n, g, h, s in [(512, 16, 6, 2, 0), (512, 16, 6, 2, 16), (512, 16, 6, 2, 128),
                          (4096, 64, 4, 8, 0), (4096, 64, 4, 8, 128)]:
        c = {"prefix_tokens": p, "group_size": n, "n_groups": 64 if p == 512 else 1, "suffix_tokens": s,
             "q_per_kv": g, "num_kv_heads": h, "head_dim": 128, "kv_dtype": "fp8", "page_size": 16, "root_tokens": 0}
        t = {table: {"default": {"median_s": float(predict_kind(fits, kind, [c], probe.l2_bytes)[0])}}
             for table, kind in (("shared_table", "decode_shared"), ("dup_table", "decode_dup"))}
        rows.append({"config": c, "triton": t, "flashinfer": {}})
    return rows


def test_the_check_reads_rows_as_the_planner_prices_them(tmp_path, capsys):
    probe = find_committed(load_hardware("h200"), "probe")
    rows = _rows(probe)
    recs = compare(rows, {"fp8": probe.fits.kv_dtypes["fp8"]["triton"]}, probe.l2_bytes)
    assert len(recs) == 10 and all(r["fit_s"] == pytest.approx(r["measured_s"], rel=1e-12) for r in recs)
    # 1,024 sequences x 2 KV heads take the launch (gain 1.36 at whole tiles); 64 x 8 do not
    assert {r["gain"] > 1 for r in recs if r["config"]["n_groups"] == 64} == {True}
    assert {r["gain"] for r in recs if r["config"]["n_groups"] == 1} == {1.0}
    ratios = {(r["set"][0], r["tokens"]): r for r in context_ratios(recs)}
    r = ratios[("decode_dup", 528)]           # 5 tiles against 4: the planner says 1.25, the tokens 1.03
    assert (r["planner"], r["tokens_rule"]) == (pytest.approx(1.25), pytest.approx(528 / 512))
    assert abs(r["measured"] - r["planner"]) < abs(r["measured"] - r["tokens_rule"])
    below = ratios[("decode_dup", 4224)]
    assert not below["in_launch"] and below["planner"] == below["tokens_rule"] == pytest.approx(4224 / 4096)
    path = tmp_path / "filled.json"
    path.write_text(json.dumps({"rows": rows, "sm_count": 132}))
    main([str(path)])
    out = capsys.readouterr().out
    assert "64x16 G6 Hkv2 fp8 P512+16" in out and "(below the launch)" in out
