"""The calibration file as the probe writes it (kernels_probe/calibration_file.py checks every document it writes
with these, merged runs included): the device and ceilings with every field present, and each row kind with every
field the probe writes declared; any other field is refused, so a row built wrongly fails where it is written,
not where a reader meets it. These extend the reader's structs (a timed row is a row the planner reads). A field
the probe may leave out is omitted when encoded where it holds its default, or defaults to UNSET where null or
the reader's default is a value the probe writes, so that a file decoded into these and encoded back holds what
it held (tests/test_probe_schema.py)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, UnsetType

from cascade_plan.calibration_schema.attention import Measurement
from cascade_plan.calibration_schema.device import Ceilings
from cascade_plan.calibration_schema.mla import MlaConfig, MlaRow
from cascade_plan.calibration_schema.quantities import (
    MAX_HEADS,
    MAX_SEQUENCES,
    Bandwidth,
    FiniteNonNeg,
    PositiveSeconds,
    Seconds,
    Text,
)
from cascade_plan.calibration_schema.steps import StepConfig, StepOpConfig, StepOpRow, StepRow

# The op-level rows `probe --step` writes (`step_ops[].op`).
STEP_OPS = ("gemm", "glue_layer", "glue_step", "allreduce", "layer_graph", "moe_grouped_gemm", "moe_layer_graph")

# bytes and FLOP counts as the probe writes them: integers where it counted them so (kept so, not made floats)
Amount = Annotated[int, msgspec.Meta(ge=0, le=1 << 62)] | Annotated[float, msgspec.Meta(ge=0, le=1e30)]
RelErr = Annotated[float, msgspec.Meta(ge=0, le=1e30)]      # a relative error against a reference
Reps = Annotated[int, msgspec.Meta(ge=1)]
Run = str                                                    # the created_utc of the run that measured a row
Plain = dict[str, Any]                                       # launch plans, tuning: kept as the probe wrote them


class ProbeDevice(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
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
    python: str | None | UnsetType = UNSET


class ProbeCeilings(Ceilings, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """The ceilings a probe run measures: every one present."""
    hbm_copy_bytes_per_s: Bandwidth
    graph_kernel_launch_s: Seconds


class TimedMeasurement(Measurement, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """One measurement row as the probe writes it: timings and the correctness check beside the median."""
    variant: str | None
    median_s: PositiveSeconds
    bytes: Amount
    unique_bytes: Amount | UnsetType = UNSET
    flops: Amount
    p10_s: Seconds
    p90_s: Seconds
    n_reps: Reps
    max_rel_err: RelErr | None
    max_rel_err_vs_decode: RelErr | None | UnsetType = UNSET   # a cascade against its own backend's decode
    composite_max_rel_err: RelErr | None | UnsetType = UNSET   # a cascade piece: the whole cascade's error
    launch: Plain | UnsetType = UNSET                          # the Triton kernels' launch plan
    timing: Text | UnsetType = UNSET                           # how sustained_s was timed
    timing_run: Text | UnsetType = UNSET                       # ... and the raw file it came from
    first_round_median_s: Seconds | UnsetType = UNSET          # a row timed twice (kernels_probe runner.RETIME_MIN_S
    run: Run | UnsetType = UNSET                               # and, from probe 1.7.1, a pass's first row of each
    #                                                            configuration): the first round; median_s the faster


class SkippedRow(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """An attention configuration a backend's kernel could not be timed at (`skipped`), and why."""
    config: Plain
    backend: str
    kernel: str
    reason: str
    variant: str | None | UnsetType = UNSET
    run: Run | UnsetType = UNSET


class SkippedPoint(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A step, op or MLA point the probe could not time (`step_skipped`, `mla_skipped`), and why."""
    workload: str | UnsetType = UNSET
    position: str | UnsetType = UNSET
    op: str | UnsetType = UNSET
    config: Plain | UnsetType = UNSET
    backend: str | UnsetType = UNSET
    kernel: str | UnsetType = UNSET
    variant: str | None | UnsetType = UNSET
    reason: str
    run: Run | UnsetType = UNSET


class ProbeStepOpConfig(StepOpConfig, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """An op row's config with every key the probe writes (which ones depends on the op)."""
    hidden: Annotated[int, msgspec.Meta(ge=1)] | None = None
    intermediate: Annotated[int, msgspec.Meta(ge=1)] | None = None
    vocab: Annotated[int, msgspec.Meta(ge=1)] | None = None
    repeats: Annotated[int, msgspec.Meta(ge=1)] | None = None      # allreduce: calls per graph
    kv_dtype: str | None = None
    skip: list[str] | None = None                                 # moe_layer_graph: the parts left out


class TimedStepOpRow(StepOpRow, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """One op-level row as `probe --step` writes it: a known op, timed."""
    op: Literal[STEP_OPS]  # type: ignore[valid-type]
    config: ProbeStepOpConfig
    touched_experts: Annotated[int, msgspec.Meta(ge=0)] | None = None
    max_rows_per_expert: Annotated[int, msgspec.Meta(ge=0)] | None = None
    bytes: Amount | None = None
    weight_bytes: Amount | None = None
    flops: Amount | None = None
    achieved_bytes_per_s: FiniteNonNeg | None = None
    achieved_flop_per_s: FiniteNonNeg | None = None
    max_rel_err: RelErr | None | UnsetType = UNSET
    median_s: PositiveSeconds
    p10_s: Seconds
    p90_s: Seconds
    n_reps: Reps
    correct: bool | UnsetType = UNSET    # type: ignore[assignment]  # written on all-reduce rows only
    per_layer_s: Seconds | None = None
    first_median_s: Seconds | None = None                        # allreduce: one call alone in a graph
    graph_of_repeats: Plain | None = None
    graph_of_one: Plain | None = None
    block_config: Plain | None = None                            # moe_grouped_gemm: the tile chosen
    candidates_s: list[Plain] | None = None                      # ... and the ones timed
    expert_block_config: Plain | None = None
    run: Run | UnsetType = UNSET


class ProbeStepConfig(StepConfig, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """A whole step's config with every key the probe writes."""
    workload: str
    model: str
    position: str
    private_tokens: Annotated[int, msgspec.Meta(ge=0, le=MAX_SEQUENCES)]
    output_tokens: Annotated[int, msgspec.Meta(ge=0, le=MAX_SEQUENCES)]
    batch: Annotated[int, msgspec.Meta(ge=1, le=MAX_SEQUENCES)]


class TimedStepRow(StepRow, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """One whole step as the probe writes it: the glue it ran and every timing field beside the median."""
    config: ProbeStepConfig
    glue: Literal["fused", "torch"]
    gpus: Annotated[int, msgspec.Meta(ge=1, le=MAX_HEADS)] | None = None
    attention_variant: str | None
    kv_cache_bytes: Amount
    p10_s: Seconds
    p90_s: Seconds
    n_reps: Reps
    max_rel_err: RelErr | None
    max_rel_err_vs_per_sequence: RelErr | None
    expert_block_config: Plain | None = None
    run: Run | UnsetType = UNSET


class TimedMlaRow(MlaRow, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """One MLA row as the probe writes it: timings and the correctness check beside the median."""
    variant: str | None
    config: MlaConfig
    bytes: Amount
    unique_bytes: Amount | UnsetType = UNSET
    flops: Amount
    p10_s: Seconds
    p90_s: Seconds
    n_reps: Reps
    max_rel_err: RelErr | None
    fi_kernel: str | UnsetType = UNSET                          # the FlashInfer kernel its wrapper picked
    run: Run | UnsetType = UNSET


class ProbeDocument(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A file the probe writes: a run's (`fitted` empty) or merged runs' (`calibrate` fills `fitted` after; its
    strict form is fitted.Fitted, which the planner reads it with)."""
    schema_version: Literal[1]
    kind: Literal["cascade-plan-calibration"]
    probe_version: str
    created_utc: str
    hardware_id: str | None
    device: ProbeDevice
    ceilings: ProbeCeilings
    grid: Plain
    measurements: list[TimedMeasurement]
    skipped: list[SkippedRow]
    fitted: Plain
    notes: Plain | UnsetType = UNSET
    mla: list[TimedMlaRow] | UnsetType = UNSET
    mla_skipped: list[SkippedPoint] | UnsetType = UNSET
    step_ops: list[TimedStepOpRow] | UnsetType = UNSET
    steps: list[TimedStepRow] | UnsetType = UNSET
    step_skipped: list[SkippedPoint] | UnsetType = UNSET
