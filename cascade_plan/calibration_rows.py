"""A calibration file's measured side as typed structs: the probe's rows (`measurements`, `step_ops`, `steps`,
`mla`), the `grid` they span, where an imported file came from (`source`) and its `crosscheck`, and the whole
document (CalibrationDoc) that the planner decodes them in. A leaf beside calibration_format.py (which holds the
version, the fitted section and the shared number types): msgspec and the standard library only.

Unknown fields in these rows are kept in the file and ignored here (the probe writes timing details, launch
plans, tuning candidates); the fields the planner reads are typed, with their ranges as annotations, so a
malformed row is refused once, where the file is read (calibration/calibration_file.py names the file, the
list, the row and the field), not as a KeyError or a numpy error downstream. Fields are declared in the order
the probe writes them: a row's `config` converted back to plain data (msgspec.to_builtins) is the dict the file
holds, key order included (the hold-out hash and `validate`'s JSON rely on it)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from cascade_plan.calibration_format import (
    MAX_BLOCK_SIZE,
    MAX_COPIES,
    MAX_HEADS,
    MAX_SAMPLES,
    MAX_SEQUENCES,
    BatchShapeDoc,
    Ceilings,
    Count,
    DecodeRowsDoc,
    Device,
    Fitted,
    KvDtype,
    Measurement,
    MlaDecodeRowsDoc,
    StepOpRow,
)

AtLeastOne = Annotated[int, msgspec.Meta(ge=1, le=MAX_SEQUENCES)]
PositiveSeconds = Annotated[float, msgspec.Meta(gt=0, le=1e4)]
Bytes = Annotated[float, msgspec.Meta(ge=0, le=1e18)]


class MlaConfig(BatchShapeDoc, frozen=True, kw_only=True):
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


class StepConfig(msgspec.Struct, frozen=True, kw_only=True):
    """The batch a whole-step row was timed at (the fields the step validation reads; the rest kept, ignored)."""

    prefix_tokens: Count
    group_size: Annotated[int, msgspec.Meta(ge=1, le=MAX_SAMPLES)]
    n_groups: Annotated[int, msgspec.Meta(ge=1, le=MAX_COPIES)]
    generated: Annotated[int, msgspec.Meta(ge=0, le=MAX_SEQUENCES)]
    kv_dtype: KvDtype | None = None
    weight_dtype: str | None = None
    suffix_tokens: Count


# The whole-step kinds beside the dense steps (kernels_probe/moe/moe_step.py), in words.
STEP_KINDS = {"moe": "MoE (GQA attention + routed experts)", "mla_moe": "MLA + MoE"}


class StepRow(msgspec.Struct, frozen=True, kw_only=True):
    """One whole decode step of a model the probe timed (`steps`: validation only, never fitted)."""

    workload: str
    model: str
    tp: Annotated[int, msgspec.Meta(ge=1, le=1024)]
    position: str
    config: StepConfig
    glue: Literal["fused", "torch"] | None = None    # the engine glue the step ran (None: the file's step_glue)
    kv_dtype: KvDtype | None = None
    weight_dtype: str | None = None
    backend: str
    mode: Literal["per_sequence", "cascade"]
    median_s: PositiveSeconds
    model_config: dict[str, Any] | None = None     # a config.json for models without a preset (read by inputs/)
    # MoE / MLA + MoE steps (kernels_probe/moe/moe_step.py); None: dense
    step_kind: Literal["moe", "mla_moe"] | None = None
    layers: Annotated[int, msgspec.Meta(ge=1, le=1024)] | None = None   # the layers built, where fewer than the model's
    allreduce: bool | None = None                   # False: one GPU's tensor-parallel shard, no all-reduce timed


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


class Transferred(msgspec.Struct, frozen=True, kw_only=True):
    from_: str | None = msgspec.field(default=None, name="from")     # the probe file the cascade kernels came from


class Source(msgspec.Struct, frozen=True, kw_only=True):
    """Where an imported file's numbers came from (AIConfigurator's package, tables, and what was transferred)."""

    label: str | None = None
    transferred: Transferred | None = None


class CrosscheckDecode(msgspec.Struct, frozen=True, kw_only=True):
    sequences: AtLeastOne
    context: AtLeastOne
    q_per_kv: Annotated[int, msgspec.Meta(ge=1, le=MAX_HEADS)]
    kv_heads: Annotated[int, msgspec.Meta(ge=1, le=MAX_HEADS)]
    aic_s: PositiveSeconds
    probe_s: dict[str, PositiveSeconds]


class Crosscheck(msgspec.Struct, frozen=True, kw_only=True):
    """What an imported file keeps from AIConfigurator's tables to check them against the probe's file."""

    probe_file: str | None = None
    aic_kernel: str | None = None
    decode: list[CrosscheckDecode] = []
    gemm_8192_s: PositiveSeconds | None = None


class StepProbeNotes(msgspec.Struct, frozen=True, kw_only=True):
    step_glue: str = "fused"                        # the glue variant the whole steps ran with


class Notes(msgspec.Struct, frozen=True, kw_only=True):
    """The probe's notes on its run (units, methods, timings: kept, ignored) and the step probe's choices."""

    step_probe: StepProbeNotes | None = None


TokenCounts = list[Annotated[float, msgspec.Meta(ge=1, le=1e7)]]


class MoeRowDoc(msgspec.Struct, frozen=True, kw_only=True):
    """An imported file's routed experts of one shape, TP, weight dtype and routing (`moe_rows`,
    calibration/aic/moe_import.py): AIConfigurator's MoE module time at each token count."""

    hidden: Annotated[int, msgspec.Meta(ge=1)]
    intermediate: Annotated[int, msgspec.Meta(ge=1)]
    experts: Annotated[int, msgspec.Meta(ge=1)]
    top_k: Annotated[int, msgspec.Meta(ge=1)]
    tp: Annotated[int, msgspec.Meta(ge=1, le=1024)] = 1
    dtype: str
    aic_dtype: str = ""
    routing: str
    kernel: str
    m: TokenCounts
    seconds: list[PositiveSeconds]


class MoeSkewDoc(msgspec.Struct, frozen=True, kw_only=True):
    """Skewed / balanced time of one expert shape measured both ways (`moe_skew`: the probe's ratio, carried
    by an import to GPUs whose rows are balanced only)."""

    hidden: Annotated[int, msgspec.Meta(ge=1)]
    intermediate: Annotated[int, msgspec.Meta(ge=1)]
    experts: Annotated[int, msgspec.Meta(ge=1)]
    top_k: Annotated[int, msgspec.Meta(ge=1)]
    dtype: str
    backend: str = ""
    m: TokenCounts
    ratio: list[Annotated[float, msgspec.Meta(gt=0, le=1e3)]]
    source: str


class CalibrationDoc(msgspec.Struct, frozen=True, kw_only=True):
    """A calibration file as the planner reads it (calibration/calibration_file.py)."""

    schema_version: Literal[1]
    kind: Literal["cascade-plan-calibration"]
    device: Device
    ceilings: Ceilings
    measurements: list[Measurement]
    hardware_id: Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$")] | None = None
    source_kind: str | None = None
    created_utc: str = ""
    fitted: Fitted | None = None
    step_ops: list[StepOpRow] = []
    steps: list[StepRow] = []
    mla: list[MlaRow] = []
    grid: Grid = msgspec.field(default_factory=Grid)
    source: Source | None = None
    crosscheck: Crosscheck | None = None
    decode_rows: DecodeRowsDoc | None = None
    mla_decode_rows: MlaDecodeRowsDoc | None = None
    moe_rows: list[MoeRowDoc] = []
    moe_skew: list[MoeSkewDoc] = []
    notes: Notes = msgspec.field(default_factory=Notes)


class SourceOnlyDoc(msgspec.Struct, frozen=True, kw_only=True):
    """A calibration file read for its `source` alone (every other field skipped unparsed)."""

    source: Source | None = None


class StepOpsOnlyDoc(msgspec.Struct, frozen=True, kw_only=True):
    """A calibration file read for its op rows alone."""

    step_ops: list[StepOpRow] = []


# The row lists a ProbeData decodes on first use (a shipped file is decoded, not checked, at start-up).
ROW_TYPES: dict[str, Any] = {"measurements": list[Measurement], "step_ops": list[StepOpRow], "steps": list[StepRow],
                             "mla": list[MlaRow], "moe_rows": list[MoeRowDoc], "moe_skew": list[MoeSkewDoc]}
