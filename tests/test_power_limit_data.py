"""The H200 measurements behind docs/probe-notes.md's power-limit diagnosis (benchmarks/raw/h200-2026-12-01c, written by
benchmarks/in_step_attention.py and benchmarks/sustained_power.py): each figure the doc quotes, read from its file."""

import json
from pathlib import Path

import pytest

RAW = Path(__file__).resolve().parent.parent / "benchmarks" / "raw" / "h200-2026-12-01c"
POWER_CAP = 0x4      # nvidia-smi clocks_event_reasons: software power cap


def _load(name: str) -> dict:
    return json.loads((RAW / name).read_text())


def _capped(reasons) -> bool:
    return any(int(r, 16) & POWER_CAP for r in reasons)


def test_fa3_cascade_alone_runs_slower_sustained_at_the_power_limit_and_nothing_else_does():
    d = _load("in_step.json")
    rows = {(r["case"], r["backend"], r["mode"]): r for r in d["rows"] if "alone_layer0_s" in r}
    for case in ("qwen3-final", "qwen3-middle"):
        r = rows[(case, "flashinfer", "cascade")]
        assert 1.10 < r["layers_per_layer_s"] / r["alone_layer0_s"] < 1.13, case
        assert abs(r["layers_idle_per_layer_s"] / r["alone_layer0_s"] - 1) < 0.015, case   # cool again: as alone
        c = d["clocks"][f"{case}/flashinfer/cascade/layers"]
        assert c["sm_mhz_min"] <= 1500 and c["power_w_median"] > 640 and _capped(c["reasons"]), case
    for key, r in rows.items():
        if key[1:] != ("flashinfer", "cascade"):
            assert r["layers_per_layer_s"] / r["alone_layer0_s"] < 1.011, key   # the Triton fp8 cascades included


def test_dense_layers_are_power_limited_from_512_tokens_in_bf16_and_1024_in_fp8():
    d = _load("power.json")
    assert d["power_limit_w"] == 700 and d["max_sm_mhz"] == 1980 and 60 < d["idle_power_w"] < 100
    layers = {(r["model"], r["weight_dtype"], r["m"]): r for r in d["rows"] if r["op"] == "layer_graph"}
    assert len(layers) == 24
    for (model, dtype, m), r in layers.items():
        ratio = r["sustained_s"] / r["cool_s"]
        if (dtype == "bf16" and m <= 64) or (dtype == "fp8" and m <= 512):
            assert not r["capped"] and ratio < 1.0, (model, dtype, m)
        if m == 2048:
            assert r["capped"] and ratio > (1.04 if dtype == "bf16" else 1.02), (model, dtype, m)
    hbm = next(r for r in d["rows"] if r["op"] == "hbm_read")
    assert hbm["bytes"] / hbm["sustained_s"] == pytest.approx(4.39e12, rel=0.01) and not hbm["capped"]


def test_a_gemm_bound_step_reaches_the_limit_its_per_sequence_twin_does_not():
    d = _load("power-steps.json")
    s = {(r["case"], r["mode"]): r for r in d["rows"]}
    q = "qwen14-first-fp8"
    assert s[(q, "per_sequence")]["sm_mhz_min"] == 1980 and not s[(q, "per_sequence")]["capped"]
    assert s[(q, "cascade")]["capped"] and s[(q, "none")]["capped"] and s[(q, "none")]["sm_mhz"] < 1900
    assert s[(q, "none")]["sustained_s"] / s[(q, "none")]["cool_s"] > 1.03
    assert not any(s[("llama8b-middle", m)]["capped"] for m in ("per_sequence", "cascade", "none"))
