"""The probe's routed-expert rows (`step_ops`, op "moe_grouped_gemm", kernels_probe/moe/moe_probe.py) as the
planner's measured tables (cost/moe_table.py): per expert shape, weight dtype and routing (balanced, skewed),
gate_up + down at each M where both were measured, from the Triton grouped GEMM where it was measured (what
engines run), else torch._grouped_mm; never the per-expert loop. An imported file's AIConfigurator MoE rows
(`moe_rows`) and the skew ratios it carries (`moe_skew`) become tables too. Built when a calibration is
loaded: the rows are the data, nothing is fitted."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from cascade_plan.calibration_schema.imported import MoeRowDoc, MoeSkewDoc
from cascade_plan.calibration_schema.steps import StepOpRow
from cascade_plan.cost.moe_table import ROUTINGS, MoeSkew, MoeTable, skew_ratio
from cascade_plan.cost.step_parts import StepParts
from cascade_plan.errors import InputError

OP = "moe_grouped_gemm"
MOE_GEMM_BACKENDS = ("triton", "grouped_mm")      # in order of preference
# what a row of this op must carry (the step-op config's fields are optional: other ops have other ones)
NEEDED = ("proj", "m", "n", "k", "experts", "top_k", "dtype", "routing", "backend")


def moe_tables(step_ops: Sequence[StepOpRow], path: str | None = None) -> tuple[MoeTable, ...]:
    groups: dict[tuple, dict[str, dict[int, dict[str, float]]]] = {}
    for i, r in enumerate(step_ops):
        if r.op != OP:
            continue
        c = r.config
        missing = next((f for f in NEEDED if getattr(c, f) is None), None)
        if missing is not None:
            raise InputError(f"a {OP} row lacks a readable {missing!r} (config: model, tp, proj, m, n, k, experts, "
                             "top_k, dtype, routing, backend; median_s)", file=path, field=f"step_ops[{i}]")
        assert (c.proj is not None and c.m is not None and c.n is not None and c.k is not None and c.routing
                is not None and c.experts is not None and c.top_k is not None and c.dtype is not None
                and c.backend is not None)
        if c.routing not in ROUTINGS or c.backend not in MOE_GEMM_BACKENDS or not r.median_s:
            continue
        if c.proj not in ("gate_up", "down"):
            raise InputError(f"a {OP} row needs proj gate_up or down, m >= 1 and a positive median_s",
                             file=path, field=f"step_ops[{i}]")
        key = (c.k if c.proj == "gate_up" else c.n, c.n // 2 if c.proj == "gate_up" else c.k, c.experts, c.top_k,
               c.dtype, c.routing)
        groups.setdefault(key, {}).setdefault(c.backend, {}).setdefault(c.m, {})[c.proj] = r.median_s
    tables = []
    for (h, ei, e, k, dtype, routing), by_backend in sorted(groups.items()):
        backend = next(b for b in MOE_GEMM_BACKENDS if b in by_backend)
        pts = sorted((m, d["gate_up"] + d["down"]) for m, d in by_backend[backend].items() if len(d) == 2)
        if pts:
            tables.append(MoeTable(hidden=h, intermediate=ei, experts=e, top_k=k, dtype=dtype,
                                   m=tuple(float(m) for m, _ in pts), seconds=tuple(s for _, s in pts),
                                   backend=backend, routing=routing))
    return tuple(tables)


def skew_ratios(tables, source: str) -> list[dict]:
    """The skewed / balanced ratio of every expert shape measured both ways by one backend (an import carries
    them to GPUs whose rows are balanced only: `moe_skew`)."""
    out = []
    for t in tables:
        if t.routing != "skewed":
            continue
        bal = next((b for b in tables if b.routing == "balanced" and b.backend == t.backend and
                    (b.hidden, b.intermediate, b.experts, b.top_k, b.dtype) ==
                    (t.hidden, t.intermediate, t.experts, t.top_k, t.dtype)), None)
        r = skew_ratio(t, bal, source) if bal is not None else None
        if r is not None:
            out.append({"hidden": r.hidden, "intermediate": r.intermediate, "experts": r.experts, "top_k": r.top_k,
                        "dtype": r.dtype, "backend": t.backend, "m": list(r.m), "ratio": list(r.ratio),
                        "source": source})
    return out


def _ascending(m: Sequence[float]) -> bool:
    return all(b > a for a, b in zip(m, m[1:]))


def _skews(rows: Sequence[MoeSkewDoc], path: str | None) -> tuple[MoeSkew, ...]:
    out = []
    for i, r in enumerate(rows):
        if len(r.m) != len(r.ratio) or not r.m or not _ascending(r.m):
            raise InputError("a MoE skew row needs ascending token counts and as many positive ratios",
                             file=path, field=f"moe_skew[{i}]")
        out.append(MoeSkew(hidden=r.hidden, intermediate=r.intermediate, experts=r.experts, top_k=r.top_k,
                           dtype=r.dtype, m=tuple(r.m), ratio=tuple(r.ratio), source=r.source))
    return tuple(out)


def aic_moe_tables(rows: Sequence[MoeRowDoc], path: str | None = None) -> tuple[MoeTable, ...]:
    """An imported file's `moe_rows` (calibration/aic/moe_import.py) as tables."""
    out = []
    for i, r in enumerate(rows):
        if len(r.m) != len(r.seconds) or len(r.m) < 2 or not _ascending(r.m):
            raise InputError("an AIConfigurator MoE row needs ascending token counts m >= 1 and as many positive "
                             "seconds", file=path, field=f"moe_rows[{i}]")
        out.append(MoeTable(hidden=r.hidden, intermediate=r.intermediate, experts=r.experts, top_k=r.top_k,
                            dtype=r.dtype, m=tuple(r.m), seconds=tuple(r.seconds), backend=r.kernel,
                            routing=r.routing, origin="aic", source_dtype=r.aic_dtype))
    return tuple(out)


def with_moe_tables(parts: StepParts, step_ops: Sequence[StepOpRow], moe_rows: Sequence[MoeRowDoc] = (),
                    moe_skew: Sequence[MoeSkewDoc] = (), path: str | None = None) -> StepParts:
    """StepParts with the file's measured routed-expert tables (unchanged when it has none): the probe's
    grouped-GEMM rows, and an imported file's AIConfigurator MoE rows and skew ratios."""
    tables = moe_tables(step_ops, path) + aic_moe_tables(moe_rows, path)
    skews = _skews(moe_skew, path)
    if skews:
        parts = msgspec.structs.replace(parts, moe_skew=skews)
    return msgspec.structs.replace(parts, moe=tables) if tables else parts
