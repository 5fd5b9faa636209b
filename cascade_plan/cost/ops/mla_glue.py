"""MLA's extra glue per layer in its absorbed form, beyond the projections priced as GEMMs (cost/ops/gemm.py):
the W_UK / W_UV batched GEMMs, the latent's RMSNorm, RoPE on the rope parts, the latent and rope-key cache
writes. A fixed time per MLA layer from the fitted `MoeLayerParams.mla_per_layer_s` (fitted together with
the MoE layer term on whole MLA + MoE steps with attention left out, calibration/moe_layer_fit.py).

None for GQA models, or where the calibration has no fit."""

from __future__ import annotations

import numpy as np

from cascade_plan.cost.ops.base import OpCost
from cascade_plan.cost.ops.context import BOTH, StepContext

# measured inside whole steps already: no composition factor
NAME, MODES, TERM, COMPOSED = "mla_glue", BOTH, "glue", None


def cost(ctx: StepContext) -> OpCost | None:
    model, parts = ctx.model, ctx.parts
    p = None if parts is None else parts.moe_layer
    if parts is None or p is None or model.attention != "mla" or not p.mla_per_layer_s:
        return None
    m = np.asarray(ctx.tokens, float)
    t = np.where(m > 0, model.num_layers * p.mla_per_layer_s, 0.0)
    return OpCost(name=NAME, bytes=np.zeros_like(t), flops=np.zeros_like(t), time_s=t,
                  source=f"{parts.source}, MLA glue fitted on {p.basis}")
