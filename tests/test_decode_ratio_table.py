"""benchmarks/decode_ratio_table.py's side-by-side table of a decode_vs_flashinfer.py stage's variants (--compare),
checked by hand on a two-row stage file."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from decode_ratio_table import compare_lines  # noqa: E402


def _row(prefix, ours: dict, fi: dict) -> dict:
    config = {"prefix_tokens": prefix, "group_size": 8, "n_groups": 1, "suffix_tokens": 128, "q_per_kv": 2,
              "num_kv_heads": 4, "head_dim": 256, "kv_dtype": "bf16", "page_size": 16}
    return {"config": config, "triton": ours, "flashinfer": fi}


def test_every_variant_side_by_side_with_flashinfers_best_decode():
    """FlashInfer's faster decode (cc 50 us, tc 40 us) over each variant's time: 40 / 50 = 0.80 for the default's 11
    splits of 384, 40 / 32 = 1.25 for the other's 12 of 352; a variant a row lacks shows a dash, and a page layout
    FlashInfer did not time no line."""
    a = _row(4096, {"dup_table": {"default": {"median_s": 50e-6, "launch": {"splits": 11, "tokens_per_split": 384}},
                                  "tiles": {"median_s": 32e-6, "launch": {"splits": 12, "tokens_per_split": 352}}},
                    "shared_table": {"default": {"median_s": 20e-6, "launch": {"splits": 17}}}},
             {"dup_table": {"cc": 50e-6, "tc": 40e-6}})
    b = _row(1024, {"dup_table": {"default": {"median_s": 10e-6, "launch": {}}}}, {"dup_table": {"cc": 12e-6}})
    lines = compare_lines([a, b])
    assert lines[:2] == ["v1: default", "v2: tiles"]
    body = lines[3:]
    assert len(body) == 2 and "shared" not in "".join(body)
    assert body[0].startswith("P=4096 n=8x1 S=128 G=2 Hkv=4 D=256 bf16") and " dup " in body[0]
    cells = body[0].split()
    assert cells[cells.index("dup") + 1:] == ["40.0", "0.80", "11", "x", "384", "1.25", "12", "x", "352"]
    cells = body[1].split()
    assert cells[cells.index("dup") + 1:] == ["12.0", "1.20", "?", "x", "?", "-"]


def test_help_prints_the_usage_instead_of_reading_a_file_named_help(capsys):
    import decode_ratio_table

    for argv in (["--help"], ["-h"], []):
        decode_ratio_table.main(argv)
        assert "Usage: python benchmarks/decode_ratio_table.py" in capsys.readouterr().out
