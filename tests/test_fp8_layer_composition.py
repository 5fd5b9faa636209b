"""fp8 weights as a step runs them: a dense layer of fp8 GEMMs back to back costs more, relative to its isolated
rows, than a bf16 layer does (the step quantises each GEMM's activation; the isolated fp8 rows take inputs
quantised beforehand). The planner multiplies a dense fp8 step's GEMMs and glue by that measured ratio
(Composition.over_bf16), and nothing else."""

import json
import math

import msgspec
import numpy as np
import pytest

from cascade_plan import load_hardware
from cascade_plan.calibration.calibration_file import find_committed
from cascade_plan.calibration.probe_params import params_from_probe
from cascade_plan.calibration.step_fit import fit_composition, fit_gemm, fit_glue
from cascade_plan.calibration.step_parts_doc import read_step_parts, step_parts_json
from cascade_plan.cost.step_parts import Composition, gemm_time_s
from cascade_plan.cost.step_terms import step_terms
from cascade_plan.inputs.model_spec import load_preset

H200 = load_hardware("h200")


@pytest.fixture(scope="module")
def probe():
    return find_committed(H200)


def _layer_ratio(probe, gemm, glue, dtype: str, m: int) -> float:
    """One layer_graph row's measured per-layer time over the same layer priced from the isolated fits, by hand."""
    shapes = {r.config.gemm: (r.config.n, r.config.k) for r in probe.step_ops
              if r.op == "gemm" and r.config.model == "llama-3-8b" and r.config.tp == 1}
    (row,) = [r for r in probe.step_ops if r.op == "layer_graph" and r.config.model == "llama-3-8b"
              and r.config.dtype == dtype and r.config.m == m]
    eb = 1.0 if dtype == "fp8" else 2.0
    flop = H200.flop_per_s(dtype)
    pred = sum(float(gemm_time_s(gemm[dtype], float(m), n, k, eb, H200.hbm_bytes_per_s, flop))
               for n, k in (shapes[g] for g in ("qkv", "o", "gate_up", "down")))
    pred += glue.per_layer_s + m * glue.per_token_layer_s
    return row.per_layer_s / pred


def test_over_bf16_is_the_fp8_layer_ratio_over_the_bf16_one(probe):
    rows, ceil = probe.step_ops, probe.ceilings
    gemm = {d: fit_gemm(rows, d, H200, ceil) for d in ("bf16", "fp8")}
    glue = fit_glue(rows, probe.step_glue, ceil)
    comp = fit_composition(rows, gemm, glue, H200)
    lm, f = comp.over_bf16["fp8"]
    assert [round(2 ** x) for x in lm] == [1, 8, 16, 32, 64, 128, 256, 512, 1024]   # the fp8 layer rows' M
    for m in (16, 512):
        want = _layer_ratio(probe, gemm, glue, "fp8", m) / _layer_ratio(probe, gemm, glue, "bf16", m)
        assert float(comp.over_bf16_at("fp8", m)) == pytest.approx(want, rel=1e-9)
    # as measured on the H200 (the 2026-12-03 layer graphs): 6-8% at M <= 128 (a quantise kernel per GEMM on a
    # ~100 us layer), 3% at 1024
    assert all(1.05 < x < 1.10 for x in f[:6]) and 1.0 < f[-1] < 1.05
    # the shipped file holds the same curve
    shipped = params_from_probe(probe, "triton", "bf16", H200, load_preset("llama-3-8b")).step.composition
    assert shipped.over_bf16["fp8"][1] == pytest.approx(f, rel=1e-6)


def test_over_bf16_interpolates_in_log2_m_and_is_one_where_not_measured():
    c = Composition(log2_m=(0.0, 10.0), factor={"bf16": (0.9, 1.0)}, over_bf16={"fp8": ((3.0, 5.0), (1.2, 1.1))})
    assert np.allclose(c.over_bf16_at("fp8", np.array([1, 8, 16, 32, 4096])), [1.2, 1.2, 1.15, 1.1, 1.1])
    assert float(c.over_bf16_at("fp8-block", 16)) == 1.0 and float(c.over_bf16_at("bf16", 16)) == 1.0


def test_the_curve_round_trips_and_older_files_read_without_it(probe):
    parts = params_from_probe(probe, "triton", "bf16", H200, load_preset("llama-3-8b")).step
    back = read_step_parts(json.loads(json.dumps(step_parts_json(parts))))
    assert back.composition == parts.composition
    doc = json.loads(json.dumps(step_parts_json(parts)))
    del doc["composition"]["over_bf16"]
    assert read_step_parts(doc).composition.over_bf16 == {}


def _terms(parts, model_id: str, weight_dtype: str, m: float):
    return step_terms(load_preset(model_id), 1, weight_dtype, np.asarray(m), parts, H200.hbm_bytes_per_s,
                      H200.flop_per_s("bf16"))


def test_a_dense_fp8_step_pays_it_and_nothing_else_does(probe):
    parts = params_from_probe(probe, "triton", "bf16", H200, load_preset("llama-3-8b")).step
    bare = msgspec.structs.replace(parts, composition=msgspec.structs.replace(parts.composition, over_bf16={}))
    f16 = float(parts.composition.over_bf16_at("fp8", 16))
    with_it, without = _terms(parts, "llama-3-8b", "fp8", 16), _terms(bare, "llama-3-8b", "fp8", 16)
    assert float(with_it.gemm_s) == pytest.approx(float(without.gemm_s) * f16, rel=1e-9)
    assert float(with_it.glue_s) == pytest.approx(float(without.glue_s) * f16, rel=1e-9)
    assert float(with_it.comm_s) == float(without.comm_s)
    for model_id, wd in (("llama-3-8b", "bf16"), ("mixtral-8x7b", "fp8")):   # bf16, and MoE (its layer term holds it)
        a, b = _terms(parts, model_id, wd, 16), _terms(bare, model_id, wd, 16)
        assert float(a.gemm_s) == float(b.gemm_s) and float(a.glue_s) == float(b.glue_s), model_id


def test_it_closes_the_fp8_weight_steps_of_a_model_never_probed(probe):
    """Mistral-Nemo-12B with fp8 weights and fp8 KV at a 32K prefix, 16 sequences (GEMMs never probed for it):
    its cascade steps, two thirds GEMMs and glue, were 5% too fast on Triton before (activation quantisation
    unpriced); re-measured on 2026-12-03, every fp8-weight step is within 4% and the cascade steps within 3%."""
    from cascade_plan.calibration.step_validation import validate_steps

    pts = [p for p in validate_steps(probe, H200)["points"] if p["weight_dtype"] == "fp8"]
    assert {p["workload"] for p in pts} == {"heldout-32k-fp8"} and len(pts) == 9
    for p in pts:
        assert abs(p["cascade_error"]) < 0.03 and abs(p["per_sequence_error"]) < 0.04, p
    assert math.isfinite(sum(p["speedup_error"] for p in pts))
