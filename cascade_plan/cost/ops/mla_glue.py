"""MLA's extra glue per layer in its absorbed form, beyond the projections priced as GEMMs (cost/ops/gemm.py):
the W_UK / W_UV batched GEMMs, the latent's RMSNorm, RoPE on the rope parts, the latent and rope-key cache
writes. A fixed time per MLA layer from the fitted `MoeLayerParams.mla_per_layer_s` (fitted together with
the MoE layer term on whole MLA + MoE steps with attention left out, calibration/moe_layer_fit.py).

None for GQA models, or where the calibration has no fit."""

from __future__ import annotations

import numpy as np

from cascade_plan.cost.ops.base import OpCost
from cascade_plan.cost.step_parts import StepParts


def cost(model, tokens, parts: StepParts) -> OpCost | None:
    p = parts.moe_layer
    if p is None or model.attention != "mla" or not p.mla_per_layer_s:
        return None
    m = np.asarray(tokens, float)
    t = np.where(m > 0, model.num_layers * p.mla_per_layer_s, 0.0)
    return OpCost(name="mla_glue", bytes=np.zeros_like(t), flops=np.zeros_like(t), time_s=t,
                  source=f"{parts.source}, MLA glue fitted on {p.basis}")
