"""Tensor parallelism's two all-reduces per layer (after the attention output projection and after the
MLP's down projection), each of tokens x hidden bf16 activations, priced from the calibration's
all-reduce for this GPU count: a measured table over message size where there is one
(`AllReduceFit.time_s`)."""

from __future__ import annotations

import numpy as np

from cascade_plan.cost.ops.base import OpCost
from cascade_plan.cost.ops.context import BOTH, StepContext

NAME, MODES, TERM, COMPOSED = "allreduce", BOTH, "comm", None
ACTIVATION_BYTES = 2.0   # bf16 activations: what the all-reduce carries
PER_LAYER = 2


def message_bytes(model, tokens) -> np.ndarray:
    """One all-reduce's message: tokens x hidden elements of 2 bytes."""
    return np.asarray(tokens, float) * model.hidden_size * ACTIVATION_BYTES


def cost(ctx: StepContext) -> OpCost | None:
    model, tp, parts = ctx.model, ctx.tp, ctx.parts
    if parts is None:
        return None
    m = np.asarray(ctx.tokens, float)
    ar = parts.allreduce_for(tp)
    if tp <= 1 or ar is None:
        z = np.zeros_like(m)
        return OpCost(name=NAME, bytes=z, flops=z, time_s=z, source="none (TP 1)" if tp <= 1 else "none")
    msg = message_bytes(model, m)
    n = PER_LAYER * model.num_layers
    return OpCost(name=NAME, bytes=n * np.where(m > 0, msg, 0.0), flops=n * m * model.hidden_size,
                  time_s=n * ar.time_s(msg), source=ar.label)
