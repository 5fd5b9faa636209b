"""The lm_head GEMM, once per step (vocab-parallel under TP: N = vocab / TP per GPU). Sampling (the
argmax over this GPU's logits), the embedding gather and the final norm are elementwise and live in the
glue's per-step part (ops/glue.py), fitted with it."""

from __future__ import annotations

from cascade_plan.cost.ops import gemm as _gemm
from cascade_plan.cost.ops.base import OpCost
from cascade_plan.cost.step_parts import StepParts


def cost(model, tp: int, weight_dtype: str, tokens, parts: StepParts, element_bytes: float,
         hbm_bytes_per_s: float, flop_per_s: float) -> OpCost:
    shapes = [s for s in _gemm.layer_gemms(model, tp) if s[0] == "lm_head"]
    return _gemm.priced("lm_head", shapes, tokens, parts, weight_dtype, element_bytes, hbm_bytes_per_s, flop_per_s)
