"""The calibration file (schema_version 1) as one typed schema: what `calibrate`, `validate` and the
planner read from it, each number finite and in range, every fit included (GQA and MLA decode, prefix,
suffix, merge, their surfaces, and the step parts: GEMM tables, glue, all-reduce).

Strictness: the `fitted` section is what the planner computes with, so every struct under it forbids
unknown fields (a misspelt or extra key is one error line, not a TypeError downstream), and every
number is typed (a string in a surface is refused here, not in numpy). At the top level and in the
measurement rows the probe writes more fields than these (timing details, notes, tuning): unknown
ones there are kept in the file and ignored. A new fitted field goes into the struct it belongs to
(KernelFitDoc for a per-kernel parameter, BackendFit for a new kernel kind, StepPartsDoc and its
parts for the rest of the step, Fitted for bookkeeping). A file that fails this schema is one error
line naming the field (the whole measurement list is checked, not its first rows), and a fit whose
result fails it is refused before anything is written. Files are read up to
limits.MAX_CALIBRATION_BYTES (16 MiB; the largest shipped one is 2.6 MB)."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from cascade_plan.errors import InputError
from cascade_plan.inputs import limits

Seconds = Annotated[float, msgspec.Meta(ge=0, le=1e4)]           # one kernel, one layer: well under hours
Fraction = Annotated[float, msgspec.Meta(ge=0, le=1)]
Count = Annotated[int, msgspec.Meta(ge=0, le=limits.MAX_CONTEXT_TOKENS)]
Bandwidth = Annotated[float, msgspec.Meta(ge=limits.HBM_BYTES_PER_S[0], le=limits.HBM_BYTES_PER_S[1] * 100)]
FlopRate = Annotated[float, msgspec.Meta(ge=limits.FLOP_PER_S[0], le=limits.FLOP_PER_S[1])]
FiniteNonNeg = Annotated[float, msgspec.Meta(ge=0, le=1e30)]
LogValue = Annotated[float, msgspec.Meta(ge=-1e3, le=1e3)]       # log10 axes of the surface
Correction = Annotated[float, msgspec.Meta(ge=-20, le=20)]        # natural-log corrections: e^20 is 5e8x already
Rate = Annotated[float, msgspec.Meta(ge=0, le=1e30)]              # 0 (not fitted) or at least MIN_RATE, checked below
MIN_RATE = 1e6


class ProbeConfig(msgspec.Struct, frozen=True, kw_only=True):
    prefix_tokens: Count
    group_size: Annotated[int, msgspec.Meta(ge=1, le=limits.MAX_SAMPLES)]
    n_groups: Annotated[int, msgspec.Meta(ge=1, le=limits.MAX_COPIES)]
    suffix_tokens: Count
    q_per_kv: Annotated[int, msgspec.Meta(ge=1, le=limits.MAX_HEADS)]
    num_kv_heads: Annotated[int, msgspec.Meta(ge=1, le=limits.MAX_HEADS)]
    head_dim: Annotated[int, msgspec.Meta(ge=1, le=limits.MAX_HEAD_DIM)]
    kv_dtype: str
    page_size: Annotated[int, msgspec.Meta(ge=1, le=limits.MAX_BLOCK_SIZE)] = 16


Text = Annotated[str, msgspec.Meta(max_length=100_000)]
Positive = Annotated[float, msgspec.Meta(gt=0, le=1e30)]
LogAxis = Annotated[float, msgspec.Meta(ge=-64, le=128)]          # log2 of a row count or a byte count


class Measurement(msgspec.Struct, frozen=True, kw_only=True):
    backend: str
    kernel: str
    config: ProbeConfig
    median_s: Seconds | None          # None or 0: not timed (the row is skipped)
    variant: str | None = None


class Device(msgspec.Struct, frozen=True, kw_only=True):
    l2_bytes: Annotated[float, msgspec.Meta(ge=limits.L2_BYTES[0], le=limits.L2_BYTES[1])]
    name: str = "unknown GPU"


class Ceilings(msgspec.Struct, frozen=True, kw_only=True):
    hbm_read_bytes_per_s: Bandwidth
    bf16_matmul_flop_per_s: FlopRate
    graph_single_kernel_s: Seconds | None = None       # read by the step fit (launch floor)
    graph_kernel_launch_s: Seconds | None = None
    hbm_copy_bytes_per_s: Bandwidth | None = None


class FittedCeilings(Ceilings, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The probe's ceilings as `calibrate` copied them into `fitted`: strict (a new ceiling goes into Ceilings)."""


class StepOpConfig(msgspec.Struct, frozen=True, kw_only=True):
    """The fields of a step-op row's config that the step fit reads (others are kept, ignored)."""
    m: Annotated[int, msgspec.Meta(ge=1, le=limits.MAX_SEQUENCES)] | None = None
    n: Annotated[int, msgspec.Meta(ge=1, le=1 << 40)] | None = None
    k: Annotated[int, msgspec.Meta(ge=1, le=1 << 40)] | None = None
    tp: Annotated[int, msgspec.Meta(ge=1, le=1024)] | None = None
    gpus: Annotated[int, msgspec.Meta(ge=1, le=1 << 20)] | None = None
    bytes: Annotated[float, msgspec.Meta(ge=0, le=1e18)] | None = None
    dtype: str | None = None
    model: str | None = None
    variant: str | None = None


class StepOpRow(msgspec.Struct, frozen=True, kw_only=True):
    """One op-level measurement of `probe --step` (the rows `calibrate` fits the step parts on)."""
    op: str
    config: StepOpConfig
    median_s: Seconds | None = None
    correct: bool = True


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
    prefix_suffix_overlap: Fraction = 0.0
    notes: list[Text] = []                          # what an imported file says about its own coverage


class GemmTableDoc(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Achieved/roofline time ratio over (log2 M, log2 weight bytes), for one weight dtype."""
    log2_m: list[LogAxis]
    log2_weight_bytes: list[LogAxis]
    ratio: list[list[Positive]]
    overhead_s: Seconds = 0.0


class GlueDoc(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    per_layer_s: Seconds
    per_token_layer_s: Seconds
    per_step_s: Seconds
    per_token_step_s: Seconds
    variant: Text = "fused"
    layer_bytes_per_token: Positive | None = None
    step_bytes_per_token: Positive | None = None
    basis: Text | None = None
    # AIConfigurator's attention timings include the new token's K/V write: its glue leaves it out
    kv_append_in_attention: bool = False
    kv_append_per_layer_s: Seconds = 0.0


class AllReduceDoc(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    latency_s: Seconds
    bytes_per_s: Annotated[float, msgspec.Meta(ge=MIN_RATE, le=1e30)]
    origin: Text = "measured"
    basis: Text = ""
    algorithm: Text | None = None
    table: list[tuple[Positive, Seconds]] = []      # the measured curve: (message bytes, seconds per call)


class GemmShapeDoc(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Achieved/roofline time ratio per (log2 M, log2 N, log2 K), for one weight dtype, where measured."""
    log2_m: list[LogAxis]
    log2_n: list[LogAxis]
    log2_k: list[LogAxis]
    ratio: list[list[list[Positive]]]


class CompositionDoc(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A layer's GEMMs and glue back to back in one graph over their isolated sum, per weight dtype over M."""
    log2_m: list[LogAxis]
    factor: dict[Text, list[Positive]]
    basis: Text = ""
    applied: bool = True


GpuCount = Annotated[str, msgspec.Meta(pattern=r"^[1-9][0-9]{0,5}$")]


class StepPartsDoc(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The rest of the decode step (cost/step_parts.py reads it): GEMM tables, glue, all-reduce per GPU count."""
    version: Literal[1]
    gemm: dict[Text, GemmTableDoc]
    glue: GlueDoc
    allreduce: dict[GpuCount, AllReduceDoc] = {}
    source: Text = "unknown"
    notes: list[Text] = []
    gemm_shapes: dict[Text, GemmShapeDoc] = {}
    composition: CompositionDoc | None = None


SpeedupError = Annotated[float, msgspec.Meta(ge=-1, le=1e3)]    # predicted / measured - 1


class SpeedupErrorsDoc(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Per backend and regime ("probed", "held_out"), the signed per-step speedup errors on the file's
    measured whole steps: of its fits, and of the default efficiencies (calibration/speedup_margin.py)."""
    fits: dict[Text, dict[Literal["probed", "held_out"], list[SpeedupError]]]
    defaults: dict[Text, dict[Literal["probed", "held_out"], list[SpeedupError]]]
    probed_models: list[Text] | None = None         # models whose GEMMs were probed: the "probed" regime


class _FittedErrorsOnly(msgspec.Struct, frozen=True, kw_only=True):
    speedup_errors: SpeedupErrorsDoc | None = None


class ErrorsOnlyDoc(msgspec.Struct, frozen=True, kw_only=True):
    """A calibration file read for its stored speedup errors alone (every other field skipped unparsed)."""
    hardware_id: str | None = None
    fitted: _FittedErrorsOnly | None = None


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
    """AIConfigurator's per-sequence decode rows of an imported file (calibration/aic_rows.py): per KV
    dtype and shape "q_per_kv/kv_heads/head_dim", times in us, one row per sequences value, one column
    per context (null: not measured)."""

    sequences: list[Annotated[int, msgspec.Meta(ge=1, le=limits.MAX_SEQUENCES)]]
    context_tokens: list[Annotated[int, msgspec.Meta(ge=1, le=limits.MAX_CONTEXT_TOKENS)]]
    kv_dtypes: dict[str, dict[str, list[list[Microseconds | None]]]]


class CalibrationDoc(msgspec.Struct, frozen=True, kw_only=True):
    schema_version: Literal[1]
    kind: Literal["cascade-plan-calibration"]
    device: Device
    ceilings: Ceilings
    measurements: list[Measurement]
    hardware_id: Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$")] | None = None
    fitted: Fitted | None = None
    step_ops: list[StepOpRow] = []
    decode_rows: DecodeRowsDoc | None = None


def _bad_rows(rows: DecodeRowsDoc | None) -> tuple[tuple, str] | None:
    """The first decode-rows matrix whose size does not match the axes, or whose shape key is not
    three positive integers."""
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


def _inconsistent(fitted: Fitted | None) -> tuple[tuple, str] | None:
    """The first fit a field-by-field schema cannot refuse: a surface whose grid does not match its
    axes, or an L2 rate that is set but tiny (it divides the step into infinity)."""
    if fitted is None:
        return None
    if fitted.step_parts is not None:
        for dtype, g in fitted.step_parts.gemm.items():
            where = ("fitted", "step_parts", "gemm", dtype)
            if (len(g.ratio) != len(g.log2_m) or any(len(r) != len(g.log2_weight_bytes) for r in g.ratio)
                    or not g.log2_m or not g.log2_weight_bytes):
                return where + ("ratio",), "the table's ratios do not match its axes (log2_m x log2_weight_bytes)"
            for axis in ("log2_m", "log2_weight_bytes"):
                v = getattr(g, axis)
                if any(b <= a for a, b in zip(v, v[1:])):
                    return where + (axis,), "must be strictly ascending"
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


def _at(data, path: tuple):
    for part in path:
        data = data[part]
    return data


def _with_only(data, path: tuple, key):
    """`data` with the mapping at `path` cut down to its entry `key` (copies along the path only)."""
    if not path:
        return {key: data[key]}
    head, rest = path[0], path[1:]
    copy = dict(data) if isinstance(data, dict) else list(data)
    copy[head] = _with_only(data[head], rest, key)
    return copy


def _locate(data, typ, exc: msgspec.ValidationError) -> tuple[tuple, str]:
    """msgspec names a mapping's entries `[...]`: find which key holds the error, level by level, by
    converting the document with that mapping cut down to one entry. (path, message)."""
    from cascade_plan.inputs.yaml_source import parse_at

    msg, _, where = str(exc).partition(" - at `")
    where = where.rstrip("`")
    if where.startswith("key` in `"):
        where = where[len("key` in `"):]
    rest, path = where[1:], ()
    while "[...]" in rest:
        before, _, rest = rest.partition("[...]")
        path += parse_at("$" + before)
        try:
            container = _at(data, path)
        except (KeyError, IndexError, TypeError):
            break
        if not isinstance(container, dict):
            break
        for key in container:
            try:
                msgspec.convert(_with_only(data, path, key), typ)
            except msgspec.ValidationError:
                path += (key,)
                break
        else:
            break
    else:
        path += parse_at("$" + rest)
    return path, msg


def _rows_error(rows) -> tuple[tuple, str] | None:
    """msgspec names dict entries `[...]`: find the KV dtype and shape of the first bad matrix."""
    per_kv = rows.get("kv_dtypes") if isinstance(rows, dict) else None
    if not isinstance(per_kv, dict):
        return None
    for kv, per in per_kv.items():
        for key, m in (per.items() if isinstance(per, dict) else [("", per)]):
            try:
                msgspec.convert(m, list[list[Microseconds | None]])
            except msgspec.ValidationError as exc:
                msg, _, where = str(exc).partition(" - at `")
                return ("decode_rows", "kv_dtypes", kv, key) if key else ("decode_rows", "kv_dtypes", kv), \
                    f"{msg} (at {where.rstrip('`').replace('$', 'the matrix')})"
    return None


def check_calibration(data: dict, source) -> CalibrationDoc:
    """Validate a calibration document; `source` is the SourceDoc (for file and field in errors). Returns
    the typed document (optional fields filled in with their defaults)."""
    from cascade_plan.inputs.yaml_source import validation_error

    if not data.get("fitted"):             # `fitted: {}`: measured, not fitted yet
        data = {**data, "fitted": None}
    try:
        doc = msgspec.convert(data, CalibrationDoc)
    except msgspec.ValidationError as exc:
        if "[...]" in str(exc):
            rows = _rows_error(data.get("decode_rows")) if "$.decode_rows" in str(exc) else None
            if rows:
                raise source.error(rows[0], rows[1].replace("`", "")) from None
            path, msg = _locate(data, CalibrationDoc, exc)
            raise source.error(path, _plain(msg)) from None
        raise validation_error(source, exc) from None
    bad = _inconsistent(doc.fitted) or _bad_rows(doc.decode_rows)
    if bad:
        raise source.error(*bad)
    return doc


def normalised_fits(doc: CalibrationDoc) -> dict | None:
    """`fitted.kv_dtypes` as plain data with every optional field of every fit present (its default where the
    file leaves it out), so the planner's readers never meet a missing key the schema allows."""
    return msgspec.to_builtins(doc.fitted.kv_dtypes) if doc.fitted is not None else None


def check_fitted(fitted: dict, file: str) -> None:
    """A fit that produced a non-finite, negative or zero parameter is an error, not a calibration."""
    from cascade_plan.errors import format_path

    try:
        bad = _inconsistent(msgspec.convert(fitted, Fitted))
        if bad:
            raise InputError(f"the fit produced an invalid parameter ({bad[1]}): the probe file's measurements are "
                             "inconsistent; nothing written", file=file, field=format_path(bad[0]))
    except msgspec.ValidationError as exc:
        path, msg = _locate(fitted, Fitted, exc)
        path = ("fitted",) + path
        raise InputError(f"the fit produced an invalid parameter ({msg.replace('`', '')}): the probe file's "
                         "measurements are inconsistent; nothing written", file=file, field=format_path(path)) from None


def _plain(msg: str) -> str:
    unknown = msg.startswith("Object contains unknown field")
    return msg.replace("`", "") + (" (not a field of this fit: check the spelling)" if unknown else "")
