"""The routed experts of every MoE layer: the experts the batch touches as one grouped GEMM per
projection (as engines run them, e.g. fused_moe). Where the calibration holds the probe's grouped-GEMM
rows of this expert shape, TP and weight dtype (cost/moe_table.py) and the step's tokens lie inside
their M range, the time is the rows' (interpolated in M); elsewhere the model: the touched experts'
weights streamed once, each expert over its share of the tokens (uniform routing: M k / touched per
expert), priced from the GEMM table at that share and the group's total weight bytes, with one launch.
`source()` says which, per run. Zero for dense models."""

from __future__ import annotations

import numpy as np

from cascade_plan.cost.moe_routing import expected_experts_touched
from cascade_plan.cost.moe_table import MODELLED, MoeTable, interpolate, table_for
from cascade_plan.cost.ops.base import OpCost
from cascade_plan.cost.ops.gemm import ACTIVATION_BYTES, gemm_table_key
from cascade_plan.cost.step_parts import StepParts, gemm_time_s


def _modelled_layer_s(model, tp: int, weight_dtype: str, parts: StepParts, element_bytes: float,
                      hbm_bytes_per_s: float, flop_per_s: float):
    eff = parts.gemm[gemm_table_key(parts, weight_dtype)]
    ei, h = model.moe_intermediate_size / tp, model.hidden_size

    def layer_s(m):
        m = np.asarray(m, float)
        touched = np.maximum(expected_experts_touched(model, m), 1e-9)
        m_e = np.where(m > 0, m * model.experts_per_token / touched, 0.0)
        # one grouped GEMM per projection: N stacks the touched experts' output rows
        return (gemm_time_s(eff, m_e, touched * 2 * ei, h, element_bytes, hbm_bytes_per_s, flop_per_s)
                + gemm_time_s(eff, m_e, touched * h, ei, element_bytes, hbm_bytes_per_s, flop_per_s))

    return layer_s


def _table(model, tp: int, weight_dtype: str, parts: StepParts) -> MoeTable | None:
    return table_for(getattr(parts, "moe", ()) or (), model, tp, weight_dtype)


def cost(model, tp: int, weight_dtype: str, tokens, parts: StepParts, element_bytes: float,
         hbm_bytes_per_s: float, flop_per_s: float) -> OpCost | None:
    """None for a model without routed experts."""
    if not (model.num_moe_layers and model.num_experts):
        return None
    m = np.asarray(tokens, float)
    layer_s = _modelled_layer_s(model, tp, weight_dtype, parts, element_bytes, hbm_bytes_per_s, flop_per_s)
    table = _table(model, tp, weight_dtype, parts)
    grouped = layer_s(m) if table is None else interpolate(table, m, layer_s)
    touched = np.maximum(expected_experts_touched(model, m), 1e-9)
    ei, h = model.moe_intermediate_size / tp, model.hidden_size
    w = touched * 3 * ei * h * element_bytes
    act = m * model.experts_per_token * (2 * ei + h + ei + h) * ACTIVATION_BYTES
    L = model.num_moe_layers
    where = "grouped expert GEMMs" if table is None else f"grouped expert GEMMs ({table.label} inside, else modelled)"
    return OpCost(name="moe", bytes=L * np.where(m > 0, w + act, 0.0),
                  flops=L * 2.0 * m * model.experts_per_token * 3 * ei * h, time_s=L * grouped,
                  source=f"{parts.source}, {where}")


def source(model, tp: int, weight_dtype: str, tokens, weights, parts: StepParts | None) -> dict | None:
    """Where a run's routed-expert times come from: measured rows or the model, the share of decode
    steps (weighted as the run total is) priced from rows, and why the rest is not. None for dense models."""
    if not (model.num_moe_layers and model.num_experts):
        return None
    if parts is None:
        return {"source": "ideal (weight bytes at peak bandwidth)", "measured_share": 0.0, "table": None,
                "outside": None}
    table = _table(model, tp, weight_dtype, parts)
    if table is None:
        return {"source": f"{MODELLED}, {parts.source}", "measured_share": 0.0, "table": None,
                "outside": f"no grouped-GEMM rows of {model.id}'s experts at TP {tp} with {weight_dtype} weights "
                           "(measure them: cascade-plan probe --workload FILE)"}
    m, w = np.asarray(tokens, float), np.asarray(weights, float)
    inside = table.inside(m).astype(float)
    share = float((inside * w).sum() / max(w.sum(), 1e-300))
    desc = {"backend": table.backend, "routing": table.routing, "dtype": table.dtype,
            "m_min": table.m[0], "m_max": table.m[-1]}
    if share >= 1.0 - 1e-12:
        return {"source": table.label, "measured_share": 1.0, "table": desc, "outside": None}
    why = f"tokens per step outside the measured M {int(table.m[0])}-{int(table.m[-1])}"
    label = MODELLED if share <= 0 else f"{table.label} for {share:.0%} of the decode steps, else {MODELLED}"
    return {"source": label, "measured_share": share, "table": desc, "outside": why}
