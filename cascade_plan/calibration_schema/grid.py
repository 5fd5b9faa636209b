"""The `grid` of a file: what the probe set out to measure (the rows say what it did), or an import's coverage."""

from __future__ import annotations

from typing import Annotated

import msgspec

from cascade_plan.calibration_schema.quantities import MAX_HEADS, Bytes, KvDtype


class GridExtent(msgspec.Struct, frozen=True, kw_only=True):
    """The longest context, the largest batch and the largest per-layer shared prefix measured."""

    context_tokens: Annotated[int, msgspec.Meta(ge=0)]
    sequences: Annotated[int, msgspec.Meta(ge=0)]
    layer_prefix_bytes: Bytes


class MeasuredGrids(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """`grid.measured` of an imported file: per-sequence decode and cascade kernels may come from different
    sources. A kind the file leaves out stays out when written back (UNSET, not null)."""

    decode: GridExtent | None | msgspec.UnsetType = msgspec.UNSET
    cascade: GridExtent | None | msgspec.UnsetType = msgspec.UNSET


class GridAxes(msgspec.Struct, frozen=True, kw_only=True):
    q_per_kv: list[Annotated[int, msgspec.Meta(ge=1, le=MAX_HEADS)]] | None = None


class Grid(msgspec.Struct, frozen=True, kw_only=True):
    """The probe's grid (what it set out to measure; the rows say what it did) or an import's coverage."""

    head_dim: Annotated[int, msgspec.Meta(ge=1, le=65_536)] | None = None
    axes: GridAxes = msgspec.field(default_factory=GridAxes)
    measured: MeasuredGrids | None = None
    measured_mla: dict[KvDtype, MeasuredGrids] | None = None      # an import's MLA kernels, per KV dtype
