"""The document the probe writes, as it writes it (before `calibrate` fills `fitted`): its ceilings, timed rows and
skipped rows, every timing field present. kernels_probe/calibration_file.py checks a run's file with these; the
planner reads files through cascade_plan/calibration_format.py, which these extend."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from cascade_plan.calibration_format import Bandwidth, Ceilings, FiniteNonNeg, Measurement, Seconds, StepOpRow
from cascade_plan.calibration_rows import PositiveSeconds, StepRow

# The op-level rows `probe --step` writes (`step_ops[].op`).
STEP_OPS = ("gemm", "glue_layer", "glue_step", "allreduce", "layer_graph", "moe_grouped_gemm", "moe_layer_graph")


class ProbeCeilings(Ceilings, frozen=True, kw_only=True):
    """The ceilings a probe run measures: every one present."""
    hbm_copy_bytes_per_s: Bandwidth
    graph_kernel_launch_s: Seconds


class TimedMeasurement(Measurement, frozen=True, kw_only=True):
    """One measurement row as the probe writes it: timings and the correctness check beside the median."""
    median_s: Annotated[float, msgspec.Meta(gt=0, le=1e4)]
    bytes: FiniteNonNeg
    flops: FiniteNonNeg
    p10_s: Seconds
    p90_s: Seconds
    n_reps: Annotated[int, msgspec.Meta(ge=1)]
    max_rel_err: Annotated[float, msgspec.Meta(ge=0, le=1e30)] | None


class ProbeDevice(msgspec.Struct, frozen=True, kw_only=True):
    """The GPU and software a run measured on: every field present (None where the run could not tell)."""
    name: str | None
    sm_count: int | None
    l2_bytes: int | None
    memory_bytes: int | None
    compute_capability: str | None
    driver: str | None
    cuda: str | None
    torch: str | None
    triton: str | None
    flashinfer: str | None


class TimedStepOpRow(StepOpRow, frozen=True, kw_only=True):
    """One op-level row as `probe --step` writes it: a known op, timed."""
    op: Literal[STEP_OPS]  # type: ignore[valid-type]
    median_s: PositiveSeconds


class TimedStepRow(StepRow, frozen=True, kw_only=True):
    """One whole step as the probe writes it: the glue it ran and every timing field beside the median."""
    glue: Literal["fused", "torch"]
    p10_s: Seconds
    p90_s: Seconds
    n_reps: Annotated[int, msgspec.Meta(ge=1)]
    max_rel_err: Annotated[float, msgspec.Meta(ge=0, le=1e30)] | None


class SkippedRow(msgspec.Struct, frozen=True, kw_only=True):
    config: dict
    backend: str
    kernel: str
    reason: str


class ProbeDocument(msgspec.Struct, frozen=True, kw_only=True):
    """The top level of a file the probe writes (before `calibrate` fills `fitted`)."""
    schema_version: Literal[1]
    kind: Literal["cascade-plan-calibration"]
    probe_version: str
    created_utc: str
    hardware_id: str | None
    device: ProbeDevice
    ceilings: ProbeCeilings
    grid: dict
    measurements: list[TimedMeasurement]
    skipped: list[SkippedRow]
    fitted: dict
    notes: dict = {}
    step_ops: list[TimedStepOpRow] = []
    steps: list[TimedStepRow] = []
