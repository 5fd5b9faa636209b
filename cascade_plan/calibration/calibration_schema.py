"""The calibration file (schema_version 1) as a typed schema: what `calibrate`, `validate` and the
planner read from it, each number finite and in range.

The probe writes more fields than these (timing details, notes, tuning); unknown fields are kept in
the file and ignored here. A file that fails this schema is one error line naming the field (the
whole measurement list is checked, not its first rows), and a fit whose result fails it is refused
before anything is written."""

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


class SurfaceDoc(msgspec.Struct, frozen=True, kw_only=True):
    log_bytes: list[LogValue]
    log_rows: list[LogValue]
    values: list[list[Correction]]


class KernelFitDoc(msgspec.Struct, frozen=True, kw_only=True):
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


class BackendFit(msgspec.Struct, frozen=True, kw_only=True):
    decode_dup: KernelFitDoc
    decode_shared: KernelFitDoc
    prefix: KernelFitDoc
    suffix: KernelFitDoc
    merge: KernelFitDoc | None = None
    prefix_suffix_overlap: Fraction = 0.0


class Fitted(msgspec.Struct, frozen=True, kw_only=True):
    ceilings: Ceilings
    kv_dtypes: dict[str, dict[str, BackendFit]]


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
    hardware_id: str | None = None
    fitted: Fitted | None = None
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
    for kv, per in fitted.kv_dtypes.items():
        for backend, fit in per.items():
            for kind in ("decode_dup", "decode_shared", "prefix", "suffix", "merge"):
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


def _fit_error(fitted) -> tuple[tuple, str] | None:
    """msgspec names dict entries `[...]`: find the KV dtype and backend of the first bad fit."""
    from cascade_plan.inputs.yaml_source import parse_at

    kv_dtypes = fitted.get("kv_dtypes") if isinstance(fitted, dict) else None
    if not isinstance(kv_dtypes, dict):
        return None
    for kv, per in kv_dtypes.items():
        if not isinstance(per, dict):
            return ("fitted", "kv_dtypes", kv), "Expected `object`"
        for backend, fit in per.items():
            try:
                msgspec.convert(fit, BackendFit)
            except msgspec.ValidationError as exc:
                msg, _, where = str(exc).partition(" - at `")
                return ("fitted", "kv_dtypes", kv, backend) + parse_at(where.rstrip("`")), msg
    return None


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


def check_calibration(data: dict, source) -> None:
    """Validate a calibration document; `source` is the SourceDoc (for file and field in errors)."""
    from cascade_plan.inputs.yaml_source import validation_error

    if not data.get("fitted"):             # `fitted: {}`: measured, not fitted yet
        data = {**data, "fitted": None}
    try:
        doc = msgspec.convert(data, CalibrationDoc)
    except msgspec.ValidationError as exc:
        located = (_fit_error(data.get("fitted")) or _rows_error(data.get("decode_rows"))) if "[...]" in str(exc) else None
        if located:
            raise source.error(located[0], located[1].replace("`", "")) from None
        raise validation_error(source, exc) from None
    bad = _inconsistent(doc.fitted) or _bad_rows(doc.decode_rows)
    if bad:
        raise source.error(*bad)


def check_fitted(fitted: dict, file: str) -> None:
    """A fit that produced a non-finite, negative or zero parameter is an error, not a calibration."""
    from cascade_plan.errors import format_path
    from cascade_plan.inputs.yaml_source import parse_at

    try:
        bad = _inconsistent(msgspec.convert(fitted, Fitted))
        if bad:
            raise InputError(f"the fit produced an invalid parameter ({bad[1]}): the probe file's measurements are "
                             "inconsistent; nothing written", file=file, field=format_path(bad[0]))
    except msgspec.ValidationError as exc:
        msg, _, where = str(exc).partition(" - at `")
        path = ("fitted",) + parse_at(where.rstrip("`"))
        located = _fit_error(fitted)
        if located:
            path, msg = located
        raise InputError(f"the fit produced an invalid parameter ({msg.replace('`', '')}): the probe file's "
                         "measurements are inconsistent; nothing written", file=file, field=format_path(path)) from None
