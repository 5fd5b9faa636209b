"""The engine's glue: per layer add-RMSNorm twice, RoPE, the new token's K/V append into the paged cache,
SiLU-and-mul; per step the embedding gather, final norm and argmax sampling. Priced from the fitted
`GlueParams` (linear in tokens), the per-token parts scaled to this model by its glue bytes per token
(cost/glue_widths.py).

Where the calibration's decode attention already includes the K/V append (AIConfigurator's generation
attention does: `GlueParams.kv_append_in_attention`), the glue leaves it out and ops/kv_append.py prices it
on its own, so the per-sequence step counts it once (inside attention) and the cascade step, whose
kernels come from the probe and do not write the cache, adds it once."""

from __future__ import annotations

import numpy as np

from cascade_plan.cost.glue_widths import (
    kv_append_bytes_per_token,
    layer_bytes_per_token,
    step_bytes_per_token,
)
from cascade_plan.cost.ops.base import OpCost
from cascade_plan.cost.ops.context import BOTH, StepContext

NAME, MODES, TERM, COMPOSED = "glue", BOTH, "glue", "dense"


def cost(ctx: StepContext) -> OpCost | None:
    model, tp, parts = ctx.model, ctx.tp, ctx.parts
    if parts is None:
        return None
    g = parts.glue
    m = np.asarray(ctx.tokens, float)
    lay, stp = layer_bytes_per_token(model, tp), step_bytes_per_token(model, tp)
    if g.kv_append_in_attention:
        lay = lay - kv_append_bytes_per_token(model, tp)
    t = g.time_s(m, model.num_layers, lay, stp)
    b = np.where(m > 0, m * (model.num_layers * lay + stp), 0.0)
    return OpCost(name=NAME, bytes=b, flops=np.zeros_like(b), time_s=t, source=f"{parts.source}, {g.variant} glue")
