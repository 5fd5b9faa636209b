"""MLA rows (the top-level `mla` list): FlashInfer's MLA wrapper timed over a latent KV cache."""

from __future__ import annotations

from typing import Annotated

import msgspec

from cascade_plan.calibration_schema.attention import BatchShapeDoc
from cascade_plan.calibration_schema.quantities import MAX_BLOCK_SIZE, MAX_HEADS, KvDtype, PositiveSeconds


class MlaConfig(BatchShapeDoc, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """An MLA row's `config` (kernels_probe/attention/mla.py: MlaShape.as_dict): one latent KV head read by every
    query head."""

    num_heads: Annotated[int, msgspec.Meta(ge=1, le=MAX_HEADS)]
    kv_lora_rank: Annotated[int, msgspec.Meta(ge=1, le=MAX_HEADS)]
    qk_rope_head_dim: Annotated[int, msgspec.Meta(ge=0, le=MAX_HEADS)]
    kv_dtype: KvDtype = "bf16"
    page_size: Annotated[int, msgspec.Meta(ge=1, le=MAX_BLOCK_SIZE)] = 16


class MlaRow(msgspec.Struct, frozen=True, kw_only=True):
    """One row of the top-level `mla` list: FlashInfer's MLA wrapper timed at one configuration."""

    backend: str
    kernel: str
    variant: str | None = None
    config: MlaConfig
    median_s: PositiveSeconds                       # timed: a configuration that failed is in `mla_skipped`

    @property
    def timed_s(self) -> float:
        """What the planner takes the row's time to be (Measurement.timed_s): MLA rows are timed one way."""
        return self.median_s
