"""The lm_head GEMM, once per step (vocab-parallel under TP: N = vocab / TP per GPU). Sampling (the
argmax over this GPU's logits), the embedding gather and the final norm are elementwise and live in the
glue's per-step part (ops/glue.py), fitted with it."""

from __future__ import annotations

from cascade_plan.cost.ops import gemm as _gemm
from cascade_plan.cost.ops.base import OpCost
from cascade_plan.cost.ops.context import BOTH, StepContext

NAME, MODES, TERM, COMPOSED = "lm_head", BOTH, "gemm", "dense"


def cost(ctx: StepContext) -> OpCost | None:
    if ctx.parts is None:
        return None
    shapes = [s for s in _gemm.layer_gemms(ctx.model, ctx.tp) if s[0] == "lm_head"]
    return _gemm.priced(NAME, shapes, ctx.tokens, ctx.parts, ctx.weight_dtype, ctx.element_bytes,
                        ctx.hbm_bytes_per_s, ctx.flop_per_s)
