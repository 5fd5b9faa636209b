"""The routed experts of every MoE layer: the experts the batch touches as one grouped GEMM per
projection (as engines run them, e.g. fused_moe): the touched experts' weights streamed once, each
expert over its share of the tokens (uniform routing: M k / touched per expert), priced from the GEMM
table at that share and the group's total weight bytes, with one launch. Zero for dense models."""

from __future__ import annotations

import numpy as np

from cascade_plan.cost.moe_routing import expected_experts_touched
from cascade_plan.cost.ops.base import OpCost
from cascade_plan.cost.ops.gemm import ACTIVATION_BYTES, gemm_table_key
from cascade_plan.cost.step_parts import StepParts, gemm_time_s


def cost(model, tp: int, weight_dtype: str, tokens, parts: StepParts, element_bytes: float,
         hbm_bytes_per_s: float, flop_per_s: float) -> OpCost | None:
    """None for a model without routed experts."""
    if not (model.num_moe_layers and model.num_experts):
        return None
    m = np.asarray(tokens, float)
    eff = parts.gemm[gemm_table_key(parts, weight_dtype)]
    touched = np.maximum(expected_experts_touched(model, m), 1e-9)
    m_e = np.where(m > 0, m * model.experts_per_token / touched, 0.0)
    ei, h = model.moe_intermediate_size / tp, model.hidden_size
    # one grouped GEMM per projection: N stacks the touched experts' output rows
    grouped = (gemm_time_s(eff, m_e, touched * 2 * ei, h, element_bytes, hbm_bytes_per_s, flop_per_s)
               + gemm_time_s(eff, m_e, touched * h, ei, element_bytes, hbm_bytes_per_s, flop_per_s))
    w = touched * 3 * ei * h * element_bytes
    act = m * model.experts_per_token * (2 * ei + h + ei + h) * ACTIVATION_BYTES
    L = model.num_moe_layers
    return OpCost(name="moe", bytes=L * np.where(m > 0, w + act, 0.0),
                  flops=L * 2.0 * m * model.experts_per_token * 3 * ei * h, time_s=L * grouped,
                  source=f"{parts.source}, grouped expert GEMMs")
