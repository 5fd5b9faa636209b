"""The rest of the decode step as fitted (`fitted.step_parts`; cost/step_parts.py prices it,
calibration/step_parts_doc.py converts): GEMM tables, glue, all-reduce per GPU count, the MoE layer term, and the
check of what a field-by-field schema cannot refuse (tables whose values do not match their axes)."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from cascade_plan.calibration_schema.quantities import (
    MIN_RATE,
    FiniteNonNeg,
    GpuCount,
    LogAxis,
    Positive,
    Seconds,
    Text,
)


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
