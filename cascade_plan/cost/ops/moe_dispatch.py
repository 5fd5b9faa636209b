"""What an MoE layer costs in a decode step beyond its routed experts' grouped GEMMs (cost/ops/moe.py): the
router GEMM, softmax top-k, the tokens' alignment into per-expert blocks, the weighted combine of each token's
k expert rows, and the grouped GEMM's per-expert cost inside a step (launching and finishing a block per
touched expert). Per MoE layer: fixed + per token x hidden size (the router reads, the alignment moves and
the combine sums rows of the hidden size) + per expert the batch touches (uniform routing,
cost/moe_routing.py), from the fitted `MoeLayerParams` (calibration/moe_layer_fit.py). For a layer shape the
probe measured (the same hidden size, experts, top-k, expert width per GPU, TP and weight dtype), inside the
batch sizes it measured, the fit times the measured / fitted ratio interpolated over log2 M: the measurement,
exact at a measured M.

Zero (None) for a dense model, or where the calibration has no fit (every imported GPU: the fit is the
H200 probe's own, `source` says so)."""

from __future__ import annotations

import numpy as np

from cascade_plan.cost.moe_routing import expected_experts_touched
from cascade_plan.cost.ops.base import OpCost
from cascade_plan.cost.ops.context import BOTH, StepContext
from cascade_plan.cost.step_parts import MoeLayerParams, StepParts, moe_layer_key

# measured inside whole steps already: no composition factor
NAME, MODES, TERM, COMPOSED = "moe_dispatch", BOTH, "glue", None


def _fitted(p: MoeLayerParams, model, m: np.ndarray) -> np.ndarray:
    touched = expected_experts_touched(model, m)
    return p.per_layer_s + m * model.hidden_size * p.per_token_hidden_layer_s + touched * p.per_expert_layer_s


def cost(ctx: StepContext) -> OpCost | None:
    """None for a model without routed experts or a calibration without the fit."""
    model, tp, tokens, parts, weight_dtype = ctx.model, ctx.tp, ctx.tokens, ctx.parts, ctx.weight_dtype
    if parts is None:
        return None
    p = parts.moe_layer
    if p is None or not (model.num_moe_layers and model.num_experts):
        return None
    m = np.asarray(tokens, float)
    per_layer = _fitted(p, model, m)
    source = f"{parts.source}, MoE routing / dispatch / combine fitted on {p.basis}"
    table = p.table_for(moe_layer_key(model, tp, weight_dtype))
    if table is not None:
        xs = np.asarray(table.log2_m)
        ratio = np.asarray(table.per_layer_s) / _fitted(p, model, 2.0 ** xs)
        x = np.log2(np.maximum(m, 1.0))
        inside = (x >= xs[0] - 1e-9) & (x <= xs[-1] + 1e-9)
        per_layer = np.where(inside, per_layer * np.interp(x, xs, ratio), per_layer)
        if inside.any():
            source = (f"{parts.source}, MoE routing / dispatch / combine measured for this layer shape ({table.label}, "
                      f"M {2 ** xs[0]:.0f}-{2 ** xs[-1]:.0f}, interpolated), fitted elsewhere")
    t = np.where(m > 0, model.num_moe_layers * per_layer, 0.0)
    return OpCost(name=NAME, bytes=np.zeros_like(t), flops=np.zeros_like(t), time_s=t, source=source)


def describe(model, parts: StepParts | None, tp: int = 1, weight_dtype: str = "bf16") -> str:
    """Where an MoE model's router / alignment / combine time comes from, in words."""
    if parts is None:
        return "router, alignment and combine not priced (no calibrated step parts: an ideal or default bound)"
    p = parts.moe_layer
    if p is None:
        return ("router, alignment and combine not priced: no MoE layer fit in this calibration (the H200 probe "
                "fits one on whole steps with attention left out; without it MoE steps there came out 10-38% "
                "too fast)")
    mla = f", MLA glue {p.mla_per_layer_s * 1e6:.1f} us per MLA layer" if model.attention == "mla" else ""
    table = p.table_for(moe_layer_key(model, tp, weight_dtype))
    if table is not None:
        return (f"router, alignment and combine measured for this layer shape ({table.label}, whole steps with "
                f"attention left out at M {2 ** table.log2_m[0]:.0f}-{2 ** table.log2_m[-1]:.0f}, interpolated; "
                f"the fit beyond){mla}")
    return (f"router, alignment and combine {p.per_layer_s * 1e6:.1f} us + {p.per_token_hidden_layer_s * 1e12:.1f} "
            f"ps per token x hidden element + {p.per_expert_layer_s * 1e9:.0f} ns per touched expert per MoE "
            f"layer{mla}; fitted on {p.basis} (whole steps with attention left out)")
