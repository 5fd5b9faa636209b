"""The calibration file's format, in one place: its version and history, and the typed structs that the
probe (the writer, kernels_probe/calibration_file.py) and the planner (the reader, calibration/) share.
A leaf: msgspec and the standard library only, no torch, nothing of cascade_plan above the top level.

Strictness: the `fitted` section is what the planner computes with, so every struct under it forbids
unknown fields (a misspelt or extra key is one error line, not a TypeError downstream), and every
number is typed, its range an annotation (a string in a surface is refused here, not in numpy). At the
top level and in the measurement rows the probe writes more fields than the reader needs (timing
details, notes, tuning): unknown ones there are kept in the file and ignored by the reader; the writer's
own rows (TimedMeasurement, ProbeCeilings: the sibling leaf calibration_probe_format.py) require them.
A new fitted field goes into the struct it belongs to (KernelFitDoc for a per-kernel parameter, BackendFit
for a new kernel kind such as `decode_mla`, StepPartsDoc and its parts for the rest of the step, Fitted for
a new fitted section or bookkeeping): one struct field each. The measured rows beyond the attention and
step-op ones (`steps`, `mla`), the grid, an import's `source` and `crosscheck`, and the whole document as
the planner reads it (CalibrationDoc) are in the sibling leaf cascade_plan/calibration_rows.py.

Version history of `schema_version` (pyperf keeps its benchmark files' JSON versions the same way). Every
change so far added optional fields with defaults, so every file ever written reads as version 1; a
change that removes or reinterprets a field bumps SCHEMA_VERSION, adds a line here, and adds the older
number to READABLE_VERSIONS with its upgrade in calibration/calibration_file.py.

1 (2026-11-29) probe 1.0: device, ceilings, grid, measurements (per-sequence decode, cascade prefix,
  suffix, merge, total), skipped; `fitted` filled by `calibrate` (per KV dtype and backend, one
  KernelFitDoc per kernel kind, prefix/suffix overlap).
  Added since, all optional (older files lack them and still read):
  - probe 1.1 (`--step`, 2026-11-30): step_ops, steps, step_skipped; fitted.step_parts (GEMM tables, glue,
    all-reduce per GPU count; its own `version` is always 1 and the file's schema_version governs);
  - AIConfigurator imports (2026-11-30): source_kind "aic", source, decode_rows, crosscheck,
    grid.measured, BackendFit.notes; the first of them wrote `step_parts` at the top level instead of
    in `fitted` (read as fitted.step_parts: calibration_file.upgraded);
  - later fits: KernelFitDoc.surface, l2_* fields, token_latency_s, q_row_s; GlueDoc byte widths and
    kv_append_*; AllReduceDoc.algorithm and table; StepPartsDoc.gemm_shapes and composition;
    fitted.speedup_errors (cascade_plan/calibration_speedup_errors.py); BackendFit.decode_mla (MLA decode);
  - probe 1.2 (2026-12-01): fp8 rows, `mla`/`mla_skipped` rows, `run` on every row, notes.runs;
  - whole MoE steps (2026-12-01): step_ops of op moe_layer_graph with StepOpRow.model_config,
    StepPartsDoc.moe_layer, speedup_errors.moe_fits;
  - MoeLayerDoc.measured (2026-12-01): the MoE layer term per measured layer shape;
  - BackendFit.prefix_rows, decode_rows (2026-12-01): FlashInfer's FA3 prefix pass tiles each query head apart;
    the probe's Triton decode computes a KV head's query heads as one padded tile;
  - CompositionDoc.over_bf16 (2026-12-01): a weight dtype's layer back to back relative to the bf16 layer's.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from cascade_plan.calibration_speedup_errors import ErrorsOnlyDoc, SpeedupErrorsDoc  # noqa: F401  (re-exported)

SCHEMA_VERSION = 1
READABLE_VERSIONS = (1,)           # versions the planner reads (older ones upgraded on reading)
KIND = "cascade-plan-calibration"

# Bounds of the counts and physical quantities a calibration may hold: the same numbers as
# inputs/limits.py (a test pins them equal), here so that the probe can check its file without the planner.
MAX_CALIBRATION_BYTES = 16 << 20
MAX_COPIES = 1_000_000
MAX_SAMPLES = 1_000_000
MAX_SEQUENCES = 1_000_000_000
MAX_CONTEXT_TOKENS = 100_000_000
MAX_BLOCK_SIZE = 1_048_576
MAX_HEADS = 65_536
MAX_HEAD_DIM = 65_536
HBM_BYTES_PER_S = (1e9, 1e15)
FLOP_PER_S = (1e11, 1e19)
L2_BYTES = (0.0, 1e11)

Seconds = Annotated[float, msgspec.Meta(ge=0, le=1e4)]           # one kernel, one layer: well under hours
Fraction = Annotated[float, msgspec.Meta(ge=0, le=1)]
Count = Annotated[int, msgspec.Meta(ge=0, le=MAX_CONTEXT_TOKENS)]
Bandwidth = Annotated[float, msgspec.Meta(ge=HBM_BYTES_PER_S[0], le=HBM_BYTES_PER_S[1] * 100)]
FlopRate = Annotated[float, msgspec.Meta(ge=FLOP_PER_S[0], le=FLOP_PER_S[1])]
FiniteNonNeg = Annotated[float, msgspec.Meta(ge=0, le=1e30)]
LogValue = Annotated[float, msgspec.Meta(ge=-1e3, le=1e3)]       # log10 axes of the surface
Correction = Annotated[float, msgspec.Meta(ge=-20, le=20)]        # natural-log corrections: e^20 is 5e8x already
Rate = Annotated[float, msgspec.Meta(ge=0, le=1e30)]              # 0 (not fitted) or at least MIN_RATE, checked below
MIN_RATE = 1e6
KvDtype = Literal["bf16", "fp16", "fp8"]         # the KV element types the probe times and the planner prices


class BatchShapeDoc(msgspec.Struct, frozen=True, kw_only=True):
    """The batch of a kernel row: n_groups prompts of prefix_tokens, each shared by group_size sequences with
    suffix_tokens of their own (the first fields of every row kind's config, in the order the probe writes)."""

    prefix_tokens: Count
    group_size: Annotated[int, msgspec.Meta(ge=1, le=MAX_SAMPLES)]
    n_groups: Annotated[int, msgspec.Meta(ge=1, le=MAX_COPIES)]
    suffix_tokens: Count


class AttentionConfigDoc(BatchShapeDoc, frozen=True, kw_only=True):
    """A measured row's `config`: the attention layer and batch shape the probe timed (its AttentionConfig)."""

    q_per_kv: Annotated[int, msgspec.Meta(ge=1, le=MAX_HEADS)]
    num_kv_heads: Annotated[int, msgspec.Meta(ge=1, le=MAX_HEADS)]
    head_dim: Annotated[int, msgspec.Meta(ge=1, le=MAX_HEAD_DIM)]
    kv_dtype: KvDtype
    page_size: Annotated[int, msgspec.Meta(ge=1, le=MAX_BLOCK_SIZE)] = 16


Text = Annotated[str, msgspec.Meta(max_length=100_000)]
Positive = Annotated[float, msgspec.Meta(gt=0, le=1e30)]
LogAxis = Annotated[float, msgspec.Meta(ge=-64, le=128)]          # log2 of a row count or a byte count


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


class Device(msgspec.Struct, frozen=True, kw_only=True):
    l2_bytes: Annotated[float, msgspec.Meta(ge=L2_BYTES[0], le=L2_BYTES[1])]
    name: str = "unknown GPU"
    sm_count: Annotated[int, msgspec.Meta(ge=1, le=1 << 20)] | None = None


class Ceilings(msgspec.Struct, frozen=True, kw_only=True):
    hbm_read_bytes_per_s: Bandwidth
    bf16_matmul_flop_per_s: FlopRate
    graph_single_kernel_s: Seconds | None = None       # read by the step fit (launch floor)
    graph_kernel_launch_s: Seconds | None = None
    hbm_copy_bytes_per_s: Bandwidth | None = None


class FittedCeilings(Ceilings, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The probe's ceilings as `calibrate` copied them into `fitted`: strict (a new ceiling goes into Ceilings)."""


class StepOpConfig(msgspec.Struct, frozen=True, kw_only=True):
    """The fields of a step-op row's config that the step fit and the MoE tables read (others are kept,
    ignored); which ones an op has depends on the op (calibration/step_fit.py, moe_rows.py)."""
    m: Annotated[int, msgspec.Meta(ge=1, le=MAX_SEQUENCES)] | None = None
    n: Annotated[int, msgspec.Meta(ge=1, le=1 << 40)] | None = None
    k: Annotated[int, msgspec.Meta(ge=1, le=1 << 40)] | None = None
    tp: Annotated[int, msgspec.Meta(ge=1, le=1024)] | None = None
    gpus: Annotated[int, msgspec.Meta(ge=1, le=1 << 20)] | None = None
    bytes: Annotated[int, msgspec.Meta(ge=0, le=1 << 60)] | None = None          # an all-reduce message
    dtype: str | None = None
    model: str | None = None
    variant: str | None = None
    gemm: str | None = None                          # gemm: qkv, o, gate_up, down, lm_head
    glue: str | None = None                          # layer_graph: the glue variant and the layers in the graph
    layers: Annotated[int, msgspec.Meta(ge=1, le=1 << 20)] | None = None
    proj: str | None = None                          # moe_grouped_gemm: gate_up or down, the expert set, routing
    experts: Annotated[int, msgspec.Meta(ge=1, le=1 << 20)] | None = None
    top_k: Annotated[int, msgspec.Meta(ge=1, le=1 << 20)] | None = None
    routing: str | None = None
    backend: str | None = None


class StepOpRow(msgspec.Struct, frozen=True, kw_only=True):
    """One op-level measurement of `probe --step` (the rows `calibrate` fits the step parts on)."""
    op: str
    config: StepOpConfig
    median_s: Seconds | None = None
    correct: bool = True
    per_layer_s: Seconds | None = None               # layer_graph: the graph's time per layer
    model_config: dict[str, Any] | None = None       # moe_layer_graph: the config.json the step was built from


class SurfaceDoc(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    log_bytes: list[LogValue]
    log_rows: list[LogValue]
    values: list[list[Correction]]


class KernelFitDoc(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    # At least 1 MB/s and 1 MFLOP/s (anything slower is a broken fit, and divides a step into infinity);
    # at most 1e30 (a kind folded into another fits as "infinitely fast").
    bw_bytes_per_s: Annotated[float, msgspec.Meta(ge=1e6, le=1e30)]
    flop_per_s: Annotated[float, msgspec.Meta(ge=1e6, le=1e30)]
    overhead_s: Seconds
    row_s: Seconds
    q_row_s: Seconds = 0.0
    token_latency_s: Seconds = 0.0
    l2_hit_max: Fraction = 0.0
    l2_window_bytes: FiniteNonNeg | None = 0.0      # None: no fall measured
    l2_bytes_per_s: Rate = 0.0
    l2_measured_up_to_bytes: FiniteNonNeg = 0.0
    surface: SurfaceDoc | None = None
    n_train: Annotated[int, msgspec.Meta(ge=0)] = 0
    train_median_ape: FiniteNonNeg = 0.0


class BackendFit(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    decode_dup: KernelFitDoc
    decode_shared: KernelFitDoc
    prefix: KernelFitDoc
    suffix: KernelFitDoc
    merge: KernelFitDoc | None = None
    decode_mla: KernelFitDoc | None = None          # MLA (DeepSeek) decode over the latent cache
    prefix_mla: KernelFitDoc | None = None          # the probe's MLA cascade: prefix pass (calibration/mla_fit.py)
    suffix_mla: KernelFitDoc | None = None          # ... and suffix pass with merge_state folded in
    mla_train_rows: Text | None = None              # how the MLA fits were trained (held-out rule, or all rows)
    mla_notes: list[Text] = []                      # what an imported file says about its MLA coverage
    prefix_suffix_overlap: Fraction = 0.0
    # how the prefix pass tiles query rows (cost/ops/attention.py PREFIX_ROWS); files without it: "kv_head"
    prefix_rows: Literal["kv_head", "q_head"] = "kv_head"
    # how its per-sequence decode computes query rows (DECODE_ROWS); files without it: "q_head"
    decode_rows: Literal["q_head", "kv_head"] = "q_head"
    notes: list[Text] = []                          # what an imported file says about its own coverage
    info: list[Text] = []                           # ... and about its numbers, without qualifying a verdict
    cascade_from: Text | None = None                # the probe backend whose cascade kernels these are (None: its own)
    train_rows: Text | None = None                  # set where too few rows to hold any out: fitted on all


class GemmTableDoc(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Achieved/roofline time ratio over (log2 M, log2 weight bytes), for one weight dtype."""
    log2_m: list[LogAxis]
    log2_weight_bytes: list[LogAxis]
    ratio: list[list[Positive]]
    overhead_s: Seconds = 0.0


class GlueDoc(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    variant: Text = "fused"
    per_layer_s: Seconds
    per_token_layer_s: Seconds
    per_step_s: Seconds
    per_token_step_s: Seconds
    layer_bytes_per_token: Positive | None = None   # None (files before glue widths): the legacy Llama-3-8B TP1 widths
    step_bytes_per_token: Positive | None = None
    basis: Text | None = None
    # AIConfigurator's attention timings include the new token's K/V write: its glue leaves it out
    kv_append_in_attention: bool = False
    kv_append_per_layer_s: Seconds = 0.0


class MoeLayerTableDoc(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The MoE layer term as measured for one layer shape (cost/step_parts.py MoeLayerTable)."""
    key: Text
    log2_m: list[LogAxis]
    per_layer_s: list[Seconds]
    label: Text = ""


class MoeLayerDoc(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """An MoE layer's cost beyond its expert GEMMs, and MLA's per-layer glue (cost/step_parts.py MoeLayerParams),
    fitted on ``moe_layer_graph`` rows (whole steps with attention left out) only: calibration/moe_layer_fit.py."""
    per_layer_s: Seconds                             # router, top-k, alignment, combine: fixed per MoE layer
    per_token_hidden_layer_s: Seconds                # ... per token per element of the hidden size
    per_expert_layer_s: Seconds                      # ... per expert the batch touches
    mla_per_layer_s: Seconds = 0.0                   # MLA's absorbed bmm, latent norm / RoPE glue per MLA layer
    basis: Text = ""
    n_train: Annotated[int, msgspec.Meta(ge=0)] = 0
    train_median_ape: FiniteNonNeg = 0.0
    train_max_ape: FiniteNonNeg = 0.0
    measured: list[MoeLayerTableDoc] = []           # per layer shape, the term as measured (absent: fit only)


class AllReduceDoc(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    latency_s: Seconds
    bytes_per_s: Annotated[float, msgspec.Meta(ge=MIN_RATE, le=1e30)]
    origin: Text = "measured"
    basis: Text = ""
    algorithm: Text | None = None
    table: list[tuple[Positive, Positive]] = []     # the measured curve: (message bytes, seconds per call)


class GemmShapeDoc(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Achieved/roofline time ratio per (log2 M, log2 N, log2 K), for one weight dtype, where measured."""
    log2_m: list[LogAxis]
    log2_n: list[LogAxis]
    log2_k: list[LogAxis]
    ratio: list[list[list[Positive]]]


class RelativeCurveDoc(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One factor per tokens-per-step point 2^log2_m."""
    log2_m: list[LogAxis]
    factor: list[Positive]


class CompositionDoc(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A layer's GEMMs and glue back to back in one graph over their isolated sum, per weight dtype over M;
    `over_bf16`: another weight dtype's factor over the bf16 factor, at that dtype's own M points."""
    log2_m: list[LogAxis]
    factor: dict[Text, list[Positive]]
    basis: Text = ""
    applied: bool = True
    over_bf16: dict[Text, RelativeCurveDoc] = {}


GpuCount = Annotated[str, msgspec.Meta(pattern=r"^[1-9][0-9]{0,5}$")]


class StepPartsDoc(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The rest of the decode step (cost/step_parts.py prices it; calibration/step_parts_doc.py converts):
    GEMM tables, glue, all-reduce per GPU count. Fields in the order files have always written them."""
    composition: CompositionDoc | None = None
    version: Literal[1]                             # always 1: the file's schema_version governs
    source: Text = "unknown"
    notes: list[Text] = []
    gemm: dict[Text, GemmTableDoc]
    glue: GlueDoc
    allreduce: dict[GpuCount, AllReduceDoc] = {}
    gemm_shapes: dict[Text, GemmShapeDoc] = {}
    moe_layer: MoeLayerDoc | None = None             # absent: not measured (every file before MoE layer rows)


class Fitted(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    ceilings: FittedCeilings
    kv_dtypes: dict[Text, dict[Text, BackendFit]]
    step_parts: StepPartsDoc | None = None
    speedup_errors: SpeedupErrorsDoc | None = None
    fit_version: Annotated[int, msgspec.Meta(ge=1)] = 1
    tool_version: Text = ""
    created_utc: Text = ""
    holdout_rule: Text | None = None


Microseconds = Annotated[float, msgspec.Meta(gt=0, le=1e10)]


class DecodeRowsDoc(msgspec.Struct, frozen=True, kw_only=True):
    """AIConfigurator's per-sequence decode rows of an imported file (calibration/aic/rows.py): per KV
    dtype and shape "q_per_kv/kv_heads/head_dim", times in us, one row per sequences value, one column
    per context (null: not measured)."""

    sequences: list[Annotated[int, msgspec.Meta(ge=1, le=MAX_SEQUENCES)]]
    context_tokens: list[Annotated[int, msgspec.Meta(ge=1, le=MAX_CONTEXT_TOKENS)]]
    kv_dtypes: dict[str, dict[str, list[list[Microseconds | None]]]]


class MlaDecodeRowsDoc(msgspec.Struct, frozen=True, kw_only=True):
    """AIConfigurator's per-sequence MLA decode rows of an imported file (calibration/aic/mla_rows.py): per
    KV dtype and query heads per GPU, times in us, one row per sequences value, one column per context."""

    sequences: list[Annotated[int, msgspec.Meta(ge=1, le=MAX_SEQUENCES)]]
    context_tokens: list[Annotated[int, msgspec.Meta(ge=1, le=MAX_CONTEXT_TOKENS)]]
    latent_width: Annotated[int, msgspec.Meta(ge=1)] = 576
    kv_dtypes: dict[str, dict[str, list[list[Microseconds | None]]]]


def bad_rows(rows: DecodeRowsDoc | None, mla: MlaDecodeRowsDoc | None = None) -> tuple[tuple, str] | None:
    """The first decode-rows matrix whose size does not match the axes, or whose shape key is not
    three positive integers (MLA rows: query heads per GPU, one positive integer)."""
    for kv, per in (mla.kv_dtypes if mla is not None else {}).items():
        assert mla is not None
        for key, m in per.items():
            where = ("mla_decode_rows", "kv_dtypes", kv, key)
            if not (key.isdigit() and int(key) > 0):
                return where, "a shape is the query heads per GPU, e.g. 16"
            if len(m) != len(mla.sequences) or any(len(r) != len(mla.context_tokens) for r in m):
                return where, "the matrix must be sequences x context_tokens (one row per sequences value)"
    if rows is None:
        return None
    for kv, per in rows.kv_dtypes.items():
        for key, m in per.items():
            where = ("decode_rows", "kv_dtypes", kv, key)
            parts = key.split("/")
            if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
                return where, "a shape is 'query heads per KV head/KV heads/head dim', e.g. 4/8/128"
            if len(m) != len(rows.sequences) or any(len(r) != len(rows.context_tokens) for r in m):
                return where, "the matrix must be sequences x context_tokens (one row per sequences value)"
    return None


def _ascending(v) -> bool:
    return bool(v) and all(b > a for a, b in zip(v, v[1:]))


def step_parts_problem(sp: StepPartsDoc) -> tuple[tuple, str] | None:
    """The first step-parts table whose values do not match its axes or whose axes do not ascend (the
    ranges of every number are the fields' annotations)."""
    for dtype, g in sp.gemm.items():
        if len(g.ratio) != len(g.log2_m) or any(len(r) != len(g.log2_weight_bytes) for r in g.ratio):
            return ("gemm", dtype, "ratio"), "the table's ratios do not match its axes (log2_m x log2_weight_bytes)"
        for axis in ("log2_m", "log2_weight_bytes"):
            if not _ascending(getattr(g, axis)):
                return ("gemm", dtype, axis), "must be strictly ascending"
    for dtype, t in sp.gemm_shapes.items():
        if (len(t.ratio) != len(t.log2_m) or any(len(p) != len(t.log2_n) for p in t.ratio)
                or any(len(r) != len(t.log2_k) for p in t.ratio for r in p)):
            return (("gemm_shapes", dtype, "ratio"),
                    "the table's ratios do not match its axes (log2_m x log2_n x log2_k)")
        for axis in ("log2_m", "log2_n", "log2_k"):
            if not _ascending(getattr(t, axis)):
                return ("gemm_shapes", dtype, axis), "must be strictly ascending"
    for n, a in sp.allreduce.items():
        if a.table and (len(a.table) < 2 or not _ascending([b for b, _ in a.table])):
            return ("allreduce", n, "table"), "must be at least two [bytes, seconds] pairs, bytes strictly ascending"
    c = sp.composition
    if c is not None:
        if not c.factor or not _ascending(c.log2_m):
            return ("composition",), "needs a strictly ascending log2_m and a factor per weight dtype"
        for dtype, f in c.factor.items():
            if len(f) != len(c.log2_m):
                return ("composition", "factor", dtype), "needs one factor per log2_m point"
    for i, m in enumerate(sp.moe_layer.measured if sp.moe_layer is not None else []):
        if len(m.log2_m) < 2 or not _ascending(m.log2_m) or len(m.per_layer_s) != len(m.log2_m):
            return (("moe_layer", "measured", i),
                    "needs a strictly ascending log2_m of two points or more and one per_layer_s per point")
    return None


def inconsistent(fitted: Fitted | None) -> tuple[tuple, str] | None:
    """The first fit a field-by-field schema cannot refuse: a surface whose grid does not match its
    axes, or an L2 rate that is set but tiny (it divides the step into infinity)."""
    if fitted is None:
        return None
    if fitted.step_parts is not None:
        bad = step_parts_problem(fitted.step_parts)
        if bad:
            return ("fitted", "step_parts") + bad[0], bad[1]
    for kv, per in fitted.kv_dtypes.items():
        for backend, fit in per.items():
            for kind in ("decode_dup", "decode_shared", "prefix", "suffix", "merge", "decode_mla", "prefix_mla",
                         "suffix_mla"):
                k = getattr(fit, kind)
                if k is None:
                    continue
                where = ("fitted", "kv_dtypes", kv, backend, kind)
                s = k.surface
                if s is not None and (len(s.values) != len(s.log_bytes) or any(len(r) != len(s.log_rows)
                                                                                for r in s.values)
                                      or len(s.log_bytes) < 2 or len(s.log_rows) < 2):
                    return where + ("surface",), "the surface's values do not match its axes (rows x columns)"
                if 0 < k.l2_bytes_per_s < MIN_RATE:
                    return where + ("l2_bytes_per_s",), f"must be 0 (none) or at least {MIN_RATE:g} bytes/s"
    return None

