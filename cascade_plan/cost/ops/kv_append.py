"""The new token's K/V write into the paged cache, on its own where the calibration's per-sequence decode
already includes it (AIConfigurator's generation attention: `GlueParams.kv_append_in_attention`) and the glue
(ops/glue.py) leaves it out: the per-sequence step counts it inside its decode, the cascade step, whose kernels
come from the probe and do not write the cache, adds it once. Zero otherwise (the glue holds it)."""

from __future__ import annotations

import numpy as np

from cascade_plan.cost.glue_widths import kv_append_bytes_per_token
from cascade_plan.cost.ops.base import OpCost
from cascade_plan.cost.ops.context import CASCADE, StepContext

NAME, MODES, TERM, COMPOSED = "kv_append", (CASCADE,), "attention", None


def cost(ctx: StepContext) -> OpCost | None:
    """Its kernel's fixed share per layer, and its bytes per token at the glue's fitted per-byte rate."""
    model, tp, parts = ctx.model, ctx.tp, ctx.parts
    if parts is None:
        return None
    g = parts.glue
    m = np.asarray(ctx.tokens, float)
    app = kv_append_bytes_per_token(model, tp)
    b = np.where(m > 0, m * model.num_layers * app, 0.0)
    if not g.kv_append_in_attention:
        return OpCost(name=NAME, bytes=np.zeros_like(b), flops=np.zeros_like(b), time_s=np.zeros_like(b))
    per_token = g.per_token_layer_s * app / g.layer_bytes_per_token
    t = np.where(m > 0, model.num_layers * (g.kv_append_per_layer_s + m * per_token), 0.0)
    return OpCost(name=NAME, bytes=b, flops=np.zeros_like(b), time_s=t, source=f"{parts.source}, glue per-byte rate")
