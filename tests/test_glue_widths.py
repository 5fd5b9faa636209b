"""Glue carried across model shapes by its bytes per token per GPU (cost/glue_widths.py): hand arithmetic
for the basis, the measured TP-2 rows that were never fitted, and the planner using it."""

import json

import numpy as np
import pytest

from cascade_plan import load_hardware
from cascade_plan.calibration.calibration_file import find_committed
from cascade_plan.calibration.step_fit import fit_glue
from cascade_plan.calibration.step_parts_doc import read_step_parts, step_parts_json
from cascade_plan.cost.glue_widths import (
    LEGACY_LAYER_BYTES_PER_TOKEN,
    LEGACY_STEP_BYTES_PER_TOKEN,
    layer_bytes_per_token,
    step_bytes_per_token,
)
from cascade_plan.cost.step_defaults import DEFAULT_STEP_PARTS
from cascade_plan.cost.step_parts import GlueParams
from cascade_plan.cost.step_terms import step_terms
from cascade_plan.inputs.model_spec import load_preset

LLAMA = load_preset("llama-3-8b")
H200 = load_hardware("h200")


def test_llama_3_8b_glue_bytes_by_hand():
    # 2 add-RMSNorms (16 x 4096) + RoPE on 32 + 8 heads (4 x 40 x 128) + K/V append (8 x 8 x 128)
    # + SiLU-and-mul (6 x 14336)
    assert (layer_bytes_per_token(LLAMA, 1) == 16 * 4096 + 4 * 40 * 128 + 8 * 8 * 128 + 6 * 14336
            == LEGACY_LAYER_BYTES_PER_TOKEN)
    # embedding (4 x 4096) + final norm (8 x 4096) + argmax over 128256 bf16 logits
    assert step_bytes_per_token(LLAMA, 1) == 12 * 4096 + 2 * 128256 == LEGACY_STEP_BYTES_PER_TOKEN
    # TP 2: hidden stays whole, heads, MLP and vocab halve
    assert layer_bytes_per_token(LLAMA, 2) == 16 * 4096 + 4 * 20 * 128 + 8 * 4 * 128 + 6 * 7168
    # more GPUs than KV heads: the KV heads are replicated, one per GPU
    assert layer_bytes_per_token(LLAMA, 16) == 16 * 4096 + 4 * 3 * 128 + 8 * 1 * 128 + 6 * 14336 / 16


def _slope(rows, op, tp):
    sel = sorted((r.config.m, r.median_s) for r in rows if r.op == op and r.config.tp == tp
                 and r.config.variant == "fused" and r.config.m >= 512)
    m, t = np.array(sel).T
    return np.polyfit(m, t, 1)[0]


def test_the_basis_predicts_the_measured_tp2_glue_that_was_never_fitted():
    rows = find_committed(H200, "probe").step_ops
    for op, fn in (("glue_layer", layer_bytes_per_token), ("glue_step", step_bytes_per_token)):
        measured = _slope(rows, op, 2) / _slope(rows, op, 1)
        predicted = fn(LLAMA, 2) / fn(LLAMA, 1)
        assert predicted == pytest.approx(measured, rel=0.05), op        # 0.68 vs 0.69, 0.58 vs 0.57
    g = fit_glue(rows, "fused", None)
    lay = [r for r in rows if r.op == "glue_layer" and r.config.tp == 2 and r.config.variant == "fused"]
    m = np.array([r.config.m for r in lay], float)
    t = np.array([r.median_s for r in lay])
    scaled = np.abs((g.per_layer_s
                     + m * g.per_token_layer_s * layer_bytes_per_token(LLAMA, 2) / g.layer_bytes_per_token) / t - 1)
    unscaled = np.abs((g.per_layer_s + m * g.per_token_layer_s) / t - 1)
    assert np.median(scaled) < 0.10 and np.max(scaled) < np.max(unscaled) / 2     # 6% / 15% vs 19% / 38%


def test_glue_time_scales_only_its_per_token_part():
    g = GlueParams(per_layer_s=20e-6, per_token_layer_s=4e-8, per_step_s=40e-6, per_token_step_s=1e-7,
                   layer_bytes_per_token=1000.0, step_bytes_per_token=2000.0)
    assert float(g.time_s(100, 10, 1000.0, 2000.0)) == pytest.approx(float(g.time_s(100, 10)))
    # twice the bytes: 10 x (20 + 100 x 0.08) us + 40 + 100 x 0.1 us
    assert float(g.time_s(100, 10, 2000.0, 2000.0)) == pytest.approx(10 * 28e-6 + 50e-6)
    assert float(g.time_s(100, 10, 1000.0, 4000.0)) == pytest.approx(10 * 24e-6 + 60e-6)


def test_fitted_glue_records_its_basis_and_old_files_read_as_llama_tp1():
    g = find_committed(H200, "probe").fitted["step_parts"]["glue"]
    assert g["basis"] == "llama-3-8b TP1" and g["layer_bytes_per_token"] == LEGACY_LAYER_BYTES_PER_TOKEN
    doc = step_parts_json(DEFAULT_STEP_PARTS)
    for key in ("layer_bytes_per_token", "step_bytes_per_token", "basis"):
        del doc["glue"][key]
    assert read_step_parts(doc).glue == DEFAULT_STEP_PARTS.glue
    doc["glue"]["layer_bytes_per_token"] = 0
    with pytest.raises(ValueError, match=r"> 0.0 - at \$.glue.layer_bytes_per_token"):
        read_step_parts(json.loads(json.dumps(doc)))


def test_planner_glue_follows_each_models_widths():
    def glue(model_id, tp=1):
        return float(step_terms(load_preset(model_id), tp, "bf16", 128, DEFAULT_STEP_PARTS, H200.hbm_bytes_per_s,
                                H200.dense_bf16_flop_per_s).glue_s)

    g = DEFAULT_STEP_PARTS.glue
    llama = 32 * (g.per_layer_s + 128 * g.per_token_layer_s) + g.per_step_s + 128 * g.per_token_step_s
    assert glue("llama-3-8b") == pytest.approx(llama)                 # the basis shape: unchanged
    assert glue("mistral-7b") < glue("llama-3-8b")                    # same layers, 32k vocab instead of 128k
    assert glue("llama-3-8b", 2) < glue("llama-3-8b")                 # heads, MLP and vocab split by TP
    q = load_preset("qwen2.5-7b")
    per_layer_token = g.per_token_layer_s * layer_bytes_per_token(q, 1) / LEGACY_LAYER_BYTES_PER_TOKEN
    assert per_layer_token > g.per_token_layer_s                      # wider MLP (18944) outweighs hidden 3584
