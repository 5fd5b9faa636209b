"""The probe's routed-expert rows (`step_ops`, op "moe_grouped_gemm", kernels_probe/moe_probe.py) as the
planner's measured tables (cost/moe_table.py): per expert shape and weight dtype, gate_up + down at each
M where both were measured, balanced routing, from the Triton grouped GEMM where it was measured (what
engines run), else torch._grouped_mm; never the per-expert loop. Built when a calibration is loaded:
the rows are the data, nothing is fitted."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from cascade_plan.calibration_format import StepOpRow
from cascade_plan.cost.moe_table import MoeTable
from cascade_plan.cost.step_parts import StepParts
from cascade_plan.errors import InputError

OP = "moe_grouped_gemm"
BACKENDS = ("triton", "grouped_mm")      # in order of preference
ROUTING = "balanced"
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
        assert (c.proj is not None and c.m is not None and c.n is not None and c.k is not None
                and c.experts is not None and c.top_k is not None and c.dtype is not None and c.backend is not None)
        if c.routing != ROUTING or c.backend not in BACKENDS or not r.median_s:
            continue
        if c.proj not in ("gate_up", "down"):
            raise InputError(f"a {OP} row needs proj gate_up or down, m >= 1 and a positive median_s",
                             file=path, field=f"step_ops[{i}]")
        key = (c.k if c.proj == "gate_up" else c.n, c.n // 2 if c.proj == "gate_up" else c.k, c.experts, c.top_k,
               c.dtype)
        groups.setdefault(key, {}).setdefault(c.backend, {}).setdefault(c.m, {})[c.proj] = r.median_s
    tables = []
    for (h, ei, e, k, dtype), by_backend in sorted(groups.items()):
        backend = next(b for b in BACKENDS if b in by_backend)
        pts = sorted((m, d["gate_up"] + d["down"]) for m, d in by_backend[backend].items() if len(d) == 2)
        if pts:
            tables.append(MoeTable(hidden=h, intermediate=ei, experts=e, top_k=k, dtype=dtype,
                                   m=tuple(float(m) for m, _ in pts), seconds=tuple(s for _, s in pts),
                                   backend=backend, routing=ROUTING))
    return tuple(tables)


def with_moe_tables(parts: StepParts, step_ops: Sequence[StepOpRow], path: str | None = None) -> StepParts:
    """StepParts with the file's measured routed-expert tables (unchanged when it has none)."""
    tables = moe_tables(step_ops, path)
    return replace(parts, moe=tables) if tables else parts
