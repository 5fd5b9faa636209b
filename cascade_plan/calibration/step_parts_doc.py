"""The step parts (cost/step_parts.py) to and from their typed form in a calibration file
(calibration_schema/step_parts.py: StepPartsDoc): the ranges are the struct's annotations and the table shapes its
step_parts_problem, so this module only maps fields."""

from __future__ import annotations

import msgspec

from cascade_plan.calibration_schema.step_parts import (
    AllReduceDoc,
    CompositionDoc,
    GemmShapeDoc,
    GemmTableDoc,
    GlueDoc,
    MoeLayerDoc,
    MoeLayerTableDoc,
    RelativeCurveDoc,
    StepPartsDoc,
    step_parts_problem,
)
from cascade_plan.cost.glue_widths import (
    LEGACY_BASIS,
    LEGACY_LAYER_BYTES_PER_TOKEN,
    LEGACY_STEP_BYTES_PER_TOKEN,
)
from cascade_plan.cost.step_parts import (
    AllReduceFit,
    Composition,
    GemmEfficiency,
    GemmShapeTable,
    GlueParams,
    MoeLayerParams,
    MoeLayerTable,
    StepParts,
    infer_algorithm,
)
from cascade_plan.errors import format_path


def _tuples(x):
    """A table (a list, or lists of lists, of numbers) as nested tuples; its rows are alike, so the first says
    whether there is another level (a per-number check cost estimate 2 ms on an imported file's shape tables)."""
    return tuple(_tuples(v) for v in x) if x and isinstance(x[0], list | tuple) else tuple(x)


def step_parts_from_doc(d: StepPartsDoc) -> StepParts:
    g = d.glue
    glue = GlueParams(variant=g.variant, per_layer_s=g.per_layer_s, per_token_layer_s=g.per_token_layer_s,
                      per_step_s=g.per_step_s, per_token_step_s=g.per_token_step_s,
                      layer_bytes_per_token=g.layer_bytes_per_token or LEGACY_LAYER_BYTES_PER_TOKEN,
                      step_bytes_per_token=g.step_bytes_per_token or LEGACY_STEP_BYTES_PER_TOKEN,
                      basis=LEGACY_BASIS if g.basis is None else g.basis,
                      kv_append_in_attention=g.kv_append_in_attention, kv_append_per_layer_s=g.kv_append_per_layer_s)
    c, ml = d.composition, d.moe_layer
    return StepParts(
        gemm={k: GemmEfficiency(dtype=k, log2_m=_tuples(e.log2_m), log2_weight_bytes=_tuples(e.log2_weight_bytes),
                                ratio=_tuples(e.ratio), overhead_s=e.overhead_s) for k, e in d.gemm.items()},
        glue=glue,
        allreduce=allreduce_from_doc(d),
        source=d.source, notes=tuple(d.notes),
        gemm_shapes={k: GemmShapeTable(dtype=k, log2_m=_tuples(e.log2_m), log2_n=_tuples(e.log2_n),
                                       log2_k=_tuples(e.log2_k), ratio=_tuples(e.ratio))
                     for k, e in d.gemm_shapes.items()},
        composition=None if c is None else Composition(
            log2_m=_tuples(c.log2_m), factor={k: _tuples(f) for k, f in c.factor.items()}, basis=c.basis,
            applied=c.applied, over_bf16={k: (_tuples(v.log2_m), _tuples(v.factor)) for k, v in c.over_bf16.items()}),
        moe_layer=None if ml is None else _moe_layer_params(ml))


def _moe_layer_params(ml: MoeLayerDoc) -> MoeLayerParams:
    scalar = {f: getattr(ml, f) for f in MoeLayerDoc.__struct_fields__ if f != "measured"}
    return MoeLayerParams(**scalar, measured=tuple(
        MoeLayerTable(key=t.key, log2_m=tuple(t.log2_m), per_layer_s=tuple(t.per_layer_s), label=t.label)
        for t in ml.measured))


def _moe_layer_doc(p: MoeLayerParams) -> MoeLayerDoc:
    scalar = {f: getattr(p, f) for f in MoeLayerDoc.__struct_fields__ if f != "measured"}
    return MoeLayerDoc(**scalar, measured=[MoeLayerTableDoc(key=t.key, log2_m=list(t.log2_m),
                                                            per_layer_s=list(t.per_layer_s), label=t.label)
                                           for t in p.measured])


def allreduce_from_doc(d: StepPartsDoc) -> dict[int, AllReduceFit]:
    """The all-reduce fits alone, by GPU count (a GPU's other file is read for these only)."""
    return {int(n): AllReduceFit(gpus=int(n), latency_s=a.latency_s, bytes_per_s=a.bytes_per_s, origin=a.origin,
                                 basis=a.basis, algorithm=a.algorithm or infer_algorithm(a.origin, a.basis),
                                 table_bytes=tuple(b for b, _ in a.table), table_s=tuple(t for _, t in a.table))
            for n, a in d.allreduce.items()}


def read_step_parts(data: dict) -> StepParts:
    """A file's `fitted.step_parts` (plain JSON data) as StepParts; ValueError naming the field when it
    breaks the format."""
    try:
        doc = msgspec.convert(data, StepPartsDoc)
    except msgspec.ValidationError as exc:
        raise ValueError(f"step parts: {str(exc).replace('`', '')}") from None
    bad = step_parts_problem(doc)
    if bad:
        raise ValueError(f"step parts: {format_path(bad[0])}: {bad[1]}")
    return step_parts_from_doc(doc)


def _lists(x):
    """Tuples (the step parts' immutable tables) as the lists the file's structs declare."""
    return [_lists(v) for v in x] if isinstance(x, list | tuple) else x


def _number(x):
    """numpy scalars as the Python numbers they hold (json writes them the same)."""
    if hasattr(x, "item"):
        return x.item()
    raise TypeError(f"not JSON data: {type(x).__name__}")


def step_parts_json(p: StepParts) -> dict:
    """`p` as the file writes it: optional parts only where present (no composition, shape tables, K/V-append
    split or all-reduce curve: no key), every all-reduce naming its algorithm."""
    c = p.composition
    doc = StepPartsDoc(
        composition=None if c is None else CompositionDoc(
            log2_m=_lists(c.log2_m), factor={k: _lists(f) for k, f in c.factor.items()}, basis=c.basis,
            applied=c.applied, over_bf16={k: RelativeCurveDoc(log2_m=_lists(x), factor=_lists(f))
                                          for k, (x, f) in c.over_bf16.items()}),
        version=1, source=p.source, notes=list(p.notes),
        gemm={k: GemmTableDoc(log2_m=_lists(e.log2_m), log2_weight_bytes=_lists(e.log2_weight_bytes),
                              ratio=_lists(e.ratio), overhead_s=e.overhead_s) for k, e in p.gemm.items()},
        glue=GlueDoc(**{f: getattr(p.glue, f) for f in GlueDoc.__struct_fields__}),
        allreduce={str(n): AllReduceDoc(latency_s=a.latency_s, bytes_per_s=a.bytes_per_s, origin=a.origin,
                                        basis=a.basis,
                                        algorithm=a.algorithm or infer_algorithm(a.origin, a.basis),
                                        table=list(zip(a.table_bytes, a.table_s)))
                   for n, a in sorted(p.allreduce.items())},
        gemm_shapes={k: GemmShapeDoc(log2_m=_lists(e.log2_m), log2_n=_lists(e.log2_n), log2_k=_lists(e.log2_k),
                                     ratio=_lists(e.ratio))
                     for k, e in p.gemm_shapes.items()},
        moe_layer=None if p.moe_layer is None else _moe_layer_doc(p.moe_layer))
    out = msgspec.to_builtins(doc, enc_hook=_number)
    if p.moe_layer is None:
        del out["moe_layer"]
    if c is None:
        del out["composition"]
    if not p.gemm_shapes:
        del out["gemm_shapes"]
    if not p.glue.kv_append_in_attention:
        del out["glue"]["kv_append_in_attention"], out["glue"]["kv_append_per_layer_s"]
    for a in out["allreduce"].values():
        if not a["table"]:
            del a["table"]
    return out
