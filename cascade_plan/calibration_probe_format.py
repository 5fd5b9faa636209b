"""The document the probe writes, as it writes it (before `calibrate` fills `fitted`): its ceilings, timed rows and
skipped rows, every timing field present. kernels_probe/calibration_file.py checks a run's file with these; the
planner reads files through cascade_plan/calibration_format.py, which these extend."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from cascade_plan.calibration_format import Bandwidth, Ceilings, FiniteNonNeg, Measurement, Seconds, StepOpRow


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
    device: dict
    ceilings: ProbeCeilings
    grid: dict
    measurements: list[TimedMeasurement]
    skipped: list[SkippedRow]
    fitted: dict
    notes: dict = {}
    step_ops: list[StepOpRow] = []
