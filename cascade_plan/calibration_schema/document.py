"""The calibration file as a whole: its kind, version and version history, and the document as the planner reads
it (CalibrationDoc, and a partial view that decodes the op rows alone and skips the rest unparsed); as the probe
writes it, it is probe_rows.ProbeDocument.

Version history of `schema_version` (pyperf keeps its benchmark files' JSON versions the same way). Every
change so far added optional fields with defaults, so every file ever written reads as version 1; a
change that removes or reinterprets a field bumps SCHEMA_VERSION, adds a line here, and adds the older
number to READABLE_VERSIONS with its upgrade in calibration/calibration_file.py.

1 (2026-11-29) probe 1.0: device, ceilings, grid, measurements (per-sequence decode, cascade prefix,
  suffix, merge, total), skipped; `fitted` filled by `calibrate` (per KV dtype and backend, one
  KernelFit per kernel kind, prefix/suffix overlap).
  Added since, all optional (older files lack them and still read):
  - probe 1.1 (`--step`, 2026-11-30): step_ops, steps, step_skipped; fitted.step_parts (GEMM tables, glue,
    all-reduce per GPU count; its own `version` is always 1 and the file's schema_version governs);
  - AIConfigurator imports (2026-11-30): source_kind "aic", source, decode_rows, crosscheck,
    grid.measured, BackendFit.notes; the first of them wrote `step_parts` at the top level instead of
    in `fitted` (read as fitted.step_parts: calibration_file.upgraded);
  - later fits: KernelFit.surface, l2_* fields, token_latency_s, q_row_s; GlueDoc byte widths and
    kv_append_*; AllReduceDoc.algorithm and table; StepPartsDoc.gemm_shapes and composition;
    fitted.speedup_errors (calibration_schema/speedup_errors.py); BackendFit.decode_mla (MLA decode);
  - probe 1.2 (2026-12-01): fp8 rows, `mla`/`mla_skipped` rows, `run` on every row, notes.runs;
  - whole MoE steps (2026-12-01): step_ops of op moe_layer_graph with StepOpRow.model_config,
    StepPartsDoc.moe_layer, speedup_errors.moe_fits;
  - MoeLayerDoc.measured (2026-12-01): the MoE layer term per measured layer shape;
  - BackendFit.prefix_rows, decode_rows (2026-12-01): FlashInfer's FA3 prefix pass tiles each query head apart;
    the probe's Triton decode computes a KV head's query heads as one padded tile;
  - CompositionDoc.over_bf16 (2026-12-01): a weight dtype's layer back to back relative to the bf16 layer's;
  - KernelFit.filled_rows, filled_min_tokens, filled_tile_tokens, filled_gain (2026-12-05): the batch-filled launch
    of the probe's Triton decode; notes.removed: rows taken out of a shipped file, and why;
  - BackendFit.page_blocks (2026-12-06): the probe's Triton decode reads a block of siblings' shared pages once;
  - KernelFit.program_token_s (2026-12-06): that decode's time per token of its busiest program.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from cascade_plan.calibration_schema.attention import Measurement
from cascade_plan.calibration_schema.device import Ceilings, Device
from cascade_plan.calibration_schema.fitted import Fitted
from cascade_plan.calibration_schema.grid import Grid
from cascade_plan.calibration_schema.imported import (
    Crosscheck,
    DecodeRowsDoc,
    MlaDecodeRowsDoc,
    MoeRowDoc,
    MoeSkewDoc,
    Source,
)
from cascade_plan.calibration_schema.mla import MlaRow
from cascade_plan.calibration_schema.steps import StepOpRow, StepRow

SCHEMA_VERSION = 1
READABLE_VERSIONS = (1,)           # versions the planner reads (older ones upgraded on reading)
KIND = "cascade-plan-calibration"


class StepProbeNotes(msgspec.Struct, frozen=True, kw_only=True):
    step_glue: str = "fused"                        # the glue variant the whole steps ran with


class Notes(msgspec.Struct, frozen=True, kw_only=True):
    """The probe's notes on its run (units, methods, timings: kept, ignored) and the step probe's choices."""

    step_probe: StepProbeNotes | None = None


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


class StepOpsOnlyDoc(msgspec.Struct, frozen=True, kw_only=True):
    """A calibration file read for its op rows alone."""

    step_ops: list[StepOpRow] = []


# The row lists a ProbeData decodes on first use (a shipped file is decoded, not checked, at start-up).
ROW_TYPES: dict[str, Any] = {"measurements": list[Measurement], "step_ops": list[StepOpRow], "steps": list[StepRow],
                             "mla": list[MlaRow], "moe_rows": list[MoeRowDoc], "moe_skew": list[MoeSkewDoc]}
