"""The GPU a file was measured on and its ceilings: as the planner reads them, as `calibrate` copies them into
`fitted`, and as the probe writes them (every field present)."""

from __future__ import annotations

from typing import Annotated

import msgspec

from cascade_plan.calibration_schema.quantities import L2_BYTES, Bandwidth, FlopRate, Seconds


class Device(msgspec.Struct, frozen=True, kw_only=True):
    l2_bytes: Annotated[float, msgspec.Meta(ge=L2_BYTES[0], le=L2_BYTES[1])]
    name: str = "unknown GPU"
    sm_count: Annotated[int, msgspec.Meta(ge=1, le=1 << 20)] | None = None
    # "major.minor" as the probe writes it; read only to look up per-architecture kernel rules (cost/ops/tiles.py),
    # which take an unknown value as no rule
    compute_capability: Annotated[str, msgspec.Meta(max_length=16)] | None = None


class Ceilings(msgspec.Struct, frozen=True, kw_only=True):
    hbm_read_bytes_per_s: Bandwidth
    bf16_matmul_flop_per_s: FlopRate
    graph_single_kernel_s: Seconds | None = None       # read by the step fit (launch floor)
    graph_kernel_launch_s: Seconds | None = None
    hbm_copy_bytes_per_s: Bandwidth | None = None


class FittedCeilings(Ceilings, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The probe's ceilings as `calibrate` copied them into `fitted`: strict (a new ceiling goes into Ceilings)."""
