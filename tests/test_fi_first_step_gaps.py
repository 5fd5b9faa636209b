"""benchmarks/fi_first_step_gaps.py: FlashInfer's KV tile from its shared-memory rule (hand arithmetic), and the
script's two checks on the shipped H200 calibration."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _module():
    spec = importlib.util.spec_from_file_location("fi_first_step_gaps", ROOT / "benchmarks" / "fi_first_step_gaps.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_kv_tile_tokens_by_hand():
    m = _module()
    # bf16, head dim 128: a unit (K and V, 64 tokens) is 2*128*64*2 = 32 KiB, the query tile 16*128*2 = 4 KiB; two
    # blocks per SM leave 114 KiB each: (116736 - 4096) // 32768 = 3 units, rounded down to 2 -> 128 tokens
    assert m.kv_tile_tokens(128, 2) == 128
    # fp8 halves the unit: (116736 - 4096) // 16384 = 6 -> 4 units -> 256 tokens
    assert m.kv_tile_tokens(128, 1) == 256
    assert m.kv_tile_tokens(64, 2) == 256          # (116736 - 2048) // 16384 = 7 -> 4
    assert m.kv_tile_tokens(256, 2) == 64          # (116736 - 8192) // 65536 = 1
    assert m.kv_tile_tokens(64, 1) == 512          # 14 units, capped at 8


def test_checks_on_shipped_calibration(capsys):
    m = _module()
    m.main([str(ROOT / "calibrations" / "h200-probe-2026-12-01.json")])
    out = capsys.readouterr().out
    jumps = [line for line in out.splitlines() if line.strip().startswith(("decode_dup", "decode_shared"))]
    assert len(jumps) >= 10
    # every 512-token prefix row at 1,024 sequences rises by more than its 16 tokens' bytes alone would
    assert all(float(line.split()[-2]) > 0.1 for line in jumps if " 512 " in line)
    assert "flashinfer" in out and "triton" in out
