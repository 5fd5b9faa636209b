"""Attention rows: the batch shape every kernel row's config starts with, the attention config, a measured row
(`measurements`) and a skipped one (`skipped`)."""

from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import UNSET, UnsetType

from cascade_plan.calibration_schema.quantities import (
    MAX_BLOCK_SIZE,
    MAX_COPIES,
    MAX_HEAD_DIM,
    MAX_HEADS,
    MAX_SAMPLES,
    Count,
    KvDtype,
    Seconds,
)


class BatchShapeDoc(msgspec.Struct, frozen=True, kw_only=True):
    """The batch of a kernel row: n_groups prompts of prefix_tokens, each shared by group_size sequences with
    suffix_tokens of their own (the first fields of every row kind's config, in the order the probe writes)."""

    prefix_tokens: Count
    group_size: Annotated[int, msgspec.Meta(ge=1, le=MAX_SAMPLES)]
    n_groups: Annotated[int, msgspec.Meta(ge=1, le=MAX_COPIES)]
    suffix_tokens: Count


class AttentionConfigDoc(BatchShapeDoc, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A measured row's `config`: the attention layer and batch shape the probe timed (its AttentionConfig)."""

    q_per_kv: Annotated[int, msgspec.Meta(ge=1, le=MAX_HEADS)]
    num_kv_heads: Annotated[int, msgspec.Meta(ge=1, le=MAX_HEADS)]
    head_dim: Annotated[int, msgspec.Meta(ge=1, le=MAX_HEAD_DIM)]
    kv_dtype: KvDtype
    page_size: Annotated[int, msgspec.Meta(ge=1, le=MAX_BLOCK_SIZE)] = 16
    # a root prefix shared by every sequence (a three-level tree), in the file only when there is one: UNSET is
    # never encoded, so a two-level config reads back, and hashes (calibration/holdout.py), as it did before trees
    root: Count | UnsetType = msgspec.field(default=UNSET, name="root_tokens")

    @property
    def root_tokens(self) -> int:
        return self.root if isinstance(self.root, int) else 0


class Measurement(msgspec.Struct, frozen=True, kw_only=True):
    backend: str
    kernel: str
    config: AttentionConfigDoc
    median_s: Seconds | None          # None or 0: not timed (the row is skipped)
    variant: str | None = None
    # the same kernel timed back to back, as every layer of a step runs it (kernels_probe/timing.py: time_sustained;
    # FlashInfer's FA3 cascade, which runs slower so): what fits and interpolation use where present
    sustained_s: Seconds | None = None

    @property
    def timed_s(self) -> float:
        """What the planner takes a timed row's time to be (calibration_file.ProbeData.select keeps only those): its
        sustained time where it was timed so, else its median."""
        if not self.median_s:
            raise ValueError(f"a {self.kernel} row of {self.backend} was not timed")
        return self.sustained_s or self.median_s
