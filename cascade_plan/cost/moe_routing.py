"""Which routed experts a decode step's batch reads, under uniform independent routing. Both the step's
weight bytes (cost_model.weight_params_read) and the grouped expert GEMMs (ops/moe.py) count these. Pure numpy."""

from __future__ import annotations

import numpy as np

from cascade_plan.inputs.model_spec import ModelSpec


def expected_experts_touched(model: ModelSpec, batch: np.ndarray | float) -> np.ndarray:
    """Distinct experts one MoE layer reads for `batch` tokens, assuming uniform independent routing:
    E x (1 - (1 - k/E)^B). One token reads its k experts; a large batch reads them all."""
    e, k = model.num_experts, model.experts_per_token
    batch = np.asarray(batch, dtype=float)
    if not e:
        return np.zeros_like(batch)
    return e * (1.0 - (1.0 - k / e) ** np.maximum(batch, 0.0))
