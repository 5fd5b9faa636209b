"""What an AIConfigurator import adds to a file (calibration/aic/): its decode rows and MLA decode rows, routed-expert
rows and skew, where its numbers came from (`source`) and its `crosscheck` against the probe."""

from __future__ import annotations

from typing import Annotated

import msgspec

from cascade_plan.calibration_schema.quantities import (
    MAX_CONTEXT_TOKENS,
    MAX_HEADS,
    MAX_SEQUENCES,
    AtLeastOne,
    Microseconds,
    PositiveSeconds,
    TokenCounts,
)


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


class SourceOnlyDoc(msgspec.Struct, frozen=True, kw_only=True):
    """A calibration file read for its `source` alone (every other field skipped unparsed)."""

    source: Source | None = None
