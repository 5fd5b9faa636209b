"""The regimes (small models at large batch, head dims 64 and 256, query groups of 6 and 12, prefixes over 64K,
suffixes over 4K) are validated on their own: kernel rows of the regimes grid (never fitted) and held-out whole steps
in those regimes, each against its own figures, apart from the core grids' targets."""

from __future__ import annotations

import numpy as np
import pytest

from cascade_plan import load_hardware
from cascade_plan.calibration.calibration_file import find_committed
from cascade_plan.calibration.holdout import held_out_regime, is_held_out, regime_names
from cascade_plan.calibration.step_validation import REGIME_TARGETS, step_points, step_regimes, summarize_regimes
from cascade_plan.calibration_schema.steps import StepConfig
from cascade_plan.inputs.model_spec import load_preset, spec_from_hf_config

H200 = load_hardware("h200")


def _cfg(prefix, group, groups, suffix):
    return StepConfig(prefix_tokens=prefix, group_size=group, n_groups=groups, generated=1, suffix_tokens=suffix)


def test_a_steps_regimes_by_hand():
    small = spec_from_hf_config({"hidden_size": 1536, "intermediate_size": 8960, "num_attention_heads": 12,
                                 "num_key_value_heads": 2, "num_hidden_layers": 28, "vocab_size": 151936}, "q", "t")
    assert step_regimes(small, _cfg(512, 16, 64, 1)) == ("small model x 1024 sequences", "6 query heads per KV head")
    assert step_regimes(small, _cfg(512, 16, 16, 1)) == ("6 query heads per KV head",)     # 256 sequences
    big = load_preset("llama-3-8b")
    assert step_regimes(big, _cfg(4096, 64, 1, 1024)) == ()
    assert step_regimes(big, _cfg(131072, 8, 1, 4097)) == ("128K-token prefix", "4097-token suffix")


@pytest.fixture(scope="module")
def points():
    return step_points(find_committed(H200), H200)


def test_the_regimes_summary_is_its_steps_by_hand(points):
    res = summarize_regimes(points)
    for key, s in res.items():
        b, kv = key.split("/")
        sel = [p for p in points if p.backend == b and p.kv_dtype == kv and p.regimes and p.held_out_shape]
        errs = np.abs([e for p in sel for e in (p.ps_err, p.cas_err)])
        assert s["step"]["n"] == errs.size and s["step"]["median"] == pytest.approx(float(np.median(errs)))
        assert s["step"]["max"] == pytest.approx(float(errs.max()))
        assert s["targets_met"] == (s["step"]["median"] <= REGIME_TARGETS["step_median"]
                                    and s["step"]["max"] <= REGIME_TARGETS["step_max"]
                                    and s["speedup"]["median"] <= REGIME_TARGETS["speedup_median"])
    # the five held-out regime models, on every backend and KV dtype the probe timed them with
    assert set(res) == {f"{b}/{kv}" for b in ("flashinfer", "flashinfer-fa2", "triton") for kv in ("bf16", "fp8")}
    assert {w for s in res.values() for w in s["workloads"]} == {
        "heldout-grpo-1024", "heldout-grpo-1024-fp8kv", "heldout-d64-1024", "heldout-d256-512", "heldout-128k-8",
        "heldout-128k-8-fp8kv", "heldout-4k-suffix"}


@pytest.mark.xdist_group("validate")        # conftest.py: one `validate --json --plots` for the tests that read it
def test_kernel_targets_are_judged_on_the_core_grids_and_the_regimes_apart(h200_validation):
    probe = find_committed(H200)
    fi = h200_validation["backends"]["flashinfer"]
    rows = [r for r in probe.select("flashinfer", "decode_dup", "tensor_cores", "bf16") if is_held_out(r.config)]
    core = [r for r in rows if not held_out_regime(r.config)]
    assert fi["kernels"]["decode_dup"]["n"] == len(core) and fi["regimes"]["decode_dup"]["n"] == len(rows) - len(core)
    names = {n for r in rows for n in regime_names(r.config)}
    assert names == {"head dim 64", "head dim 256", "G = 6", "G = 12", "prefix > 64K", "suffix > 4K", "rollout start"}
    assert set(fi["regimes"]["decode_dup"]["by_regime"]) == names
    assert "speedup" in fi["regimes"] and 0 < fi["regimes"]["speedup"]["picks_correct"] <= 1
