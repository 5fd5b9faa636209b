"""What every op of a decode step is priced from: one struct, the same for every op module (cost/ops/registry.py).

The non-attention ops read the model, tensor parallelism, the weight dtype, the tokens of the step and the
calibration's `StepParts`; the attention ops also read the kernels' parameters, the per-GPU shape and the step's
attention load. A caller pricing the non-attention ops alone (cost/step_terms.py `step_ops`) leaves those out,
and the attention ops then return None."""

from __future__ import annotations

import msgspec
import numpy as np

from cascade_plan.cost.cost_params import CostParams
from cascade_plan.cost.step_parts import StepParts
from cascade_plan.cost.step_shape import GpuShape, StepLoad
from cascade_plan.inputs.dtypes import ELEMENT_BYTES
from cascade_plan.inputs.model_spec import ModelSpec

PER_SEQUENCE, CASCADE = "per_sequence", "cascade"
BOTH = (PER_SEQUENCE, CASCADE)


class StepContext(msgspec.Struct, frozen=True):
    model: ModelSpec
    tp: int
    weight_dtype: str
    tokens: np.ndarray                 # tokens of the step: the sequences decoding, one token each
    hbm_bytes_per_s: float
    flop_per_s: float                  # the GEMMs' peak at the weight dtype
    parts: StepParts | None = None     # None: no calibrated step parts (the seed's single weights term)
    params: CostParams | None = None   # None: the attention ops and the weights term are not priced
    shape: GpuShape | None = None
    load: StepLoad | None = None
    prefix_caching: bool = True

    @property
    def element_bytes(self) -> float:
        return ELEMENT_BYTES[self.weight_dtype]

    def attention_inputs(self) -> tuple[StepLoad, GpuShape, CostParams] | None:
        """What the attention ops price from (None: a context for the non-attention ops alone)."""
        if self.params is None or self.shape is None or self.load is None:
            return None
        return self.load, self.shape, self.params

    @property
    def q_per_kv(self) -> int:
        assert self.shape is not None
        return self.shape.q_heads // self.shape.kv_heads

    @property
    def kernel_rows(self) -> np.ndarray:
        """(sequence, KV head) rows of the attention kernels, per layer."""
        assert self.shape is not None and self.load is not None
        return self.load.active_seqs * self.shape.kv_heads

    @property
    def mla(self) -> bool:
        return self.params is not None and self.params.attention_kind == "mla"

    def decode_tile_factor(self):
        """Computed per useful FLOP of a decoding sequence's query rows: the probe's MLA kernels fill whole tiles
        of query rows (cost/ops/mla_attention.py); GQA kernels 1."""
        if not self.mla:
            return 1.0
        from cascade_plan.cost.ops.mla_attention import mla_tile_factor

        assert self.shape is not None
        return mla_tile_factor(self.shape.q_heads)
