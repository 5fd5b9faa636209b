"""The routed experts of every MoE layer: the experts the batch touches as one grouped GEMM per
projection (as engines run them, e.g. fused_moe). Where the calibration holds the probe's grouped-GEMM
rows of this expert shape, TP and weight dtype (cost/moe_table.py) and the step's tokens lie inside
their M range, the time is the rows' (interpolated in M); elsewhere the model: the touched experts'
weights streamed once, each expert over its share of the tokens (uniform routing: M k / touched per
expert), priced from the GEMM table at that share and the group's total weight bytes, with one launch.
`source()` says which, per run. Zero for dense models.

Routing: balanced unless the workload says skewed (StepParts.moe_routing, set from the scenario). Skewed
is priced from skewed rows of the shape where the calibration measured them (the probe's); else from the
balanced price times the skewed / balanced ratio the H200 probe measured for that shape (MoeSkew, carried
into imported files), labelled so; else balanced, and the source says that the skew is not priced."""

from __future__ import annotations

import numpy as np

from cascade_plan.cost.moe_routing import expected_experts_touched
from cascade_plan.cost.moe_table import MODELLED, MoeSkew, MoeTable, interpolate, skew_for, table_for
from cascade_plan.cost.ops.base import OpCost
from cascade_plan.cost.ops.context import BOTH, StepContext
from cascade_plan.cost.ops.gemm import ACTIVATION_BYTES, gemm_table_key
from cascade_plan.cost.step_parts import StepParts, gemm_time_s

NAME, MODES, TERM, COMPOSED = "moe", BOTH, "gemm", "moe"


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


def _pricing(model, tp: int, weight_dtype: str, parts: StepParts) -> tuple[MoeTable | None, MoeSkew | None]:
    """The table that prices the experts at the asked routing (its own skewed rows where measured, else
    the balanced ones), and the H200 skew ratio to apply on top where the table is balanced but skewed
    routing was asked (None otherwise)."""
    tables = getattr(parts, "moe", ()) or ()
    routing = parts.moe_routing
    if routing != "balanced":
        own = table_for(tables, model, tp, weight_dtype, routing)
        if own is not None:
            return own, None
        return table_for(tables, model, tp, weight_dtype), skew_for(parts.moe_skew, model, tp, weight_dtype)
    return table_for(tables, model, tp, weight_dtype), None


def cost(ctx: StepContext) -> OpCost | None:
    """None for a model without routed experts (or without calibrated step parts)."""
    model, tp, weight_dtype, parts, element_bytes = ctx.model, ctx.tp, ctx.weight_dtype, ctx.parts, ctx.element_bytes
    hbm_bytes_per_s, flop_per_s = ctx.hbm_bytes_per_s, ctx.flop_per_s
    if parts is None or not (model.num_moe_layers and model.num_experts):
        return None
    m = np.asarray(ctx.tokens, float)
    layer_s = _modelled_layer_s(model, tp, weight_dtype, parts, element_bytes, hbm_bytes_per_s, flop_per_s)
    table, skew = _pricing(model, tp, weight_dtype, parts)
    grouped = layer_s(m) if table is None else interpolate(table, m, layer_s)
    if skew is not None:
        grouped = grouped * skew.at(m)
    touched = np.maximum(expected_experts_touched(model, m), 1e-9)
    ei, h = model.moe_intermediate_size / tp, model.hidden_size
    w = touched * 3 * ei * h * element_bytes
    act = m * model.experts_per_token * (2 * ei + h + ei + h) * ACTIVATION_BYTES
    L = model.num_moe_layers
    where = "grouped expert GEMMs" if table is None else f"grouped expert GEMMs ({table.label} inside, else modelled)"
    return OpCost(name=NAME, bytes=L * np.where(m > 0, w + act, 0.0),
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
    table, skew = _pricing(model, tp, weight_dtype, parts)
    out = _balanced_source(model, tp, weight_dtype, tokens, weights, parts, table)
    if parts.moe_routing == "balanced":
        return out
    asked = parts.moe_routing
    if table is not None and table.routing == asked:
        note = f"{asked} routing: from the {asked} rows"
    elif skew is not None:
        lo, hi = min(skew.ratio), max(skew.ratio)
        note = (f"{asked} routing: the balanced times x the {asked} / balanced ratio the probe measured for this "
                f"expert shape ({lo:.2f}-{hi:.2f} over M {int(skew.m[0])}-{int(skew.m[-1])}, {skew.source}), "
                "not measured on this GPU")
        out["source"] = f"{out['source']}, x the probe's {asked}-routing ratio"
    else:
        note = (f"{asked} routing asked, but no {asked} rows and no measured {asked} / balanced ratio of "
                f"{model.id}'s experts at TP {tp} with {weight_dtype} weights: priced as balanced")
    bytes_ = "; the weight bytes shown count uniform routing's touched experts"
    return {**out, "routing": asked, "routing_note": note + bytes_}


def _balanced_source(model, tp: int, weight_dtype: str, tokens, weights, parts: StepParts,
                     table: MoeTable | None) -> dict:
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
