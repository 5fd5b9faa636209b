"""The probe's routed-expert rows (`step_ops`, op "moe_grouped_gemm", kernels_probe/moe_probe.py) as the
planner's measured tables (cost/moe_table.py): per expert shape, weight dtype and routing (balanced, skewed),
gate_up + down at each M where both were measured, from the Triton grouped GEMM where it was measured (what
engines run), else torch._grouped_mm; never the per-expert loop. Built when a calibration is loaded:
the rows are the data, nothing is fitted."""

from __future__ import annotations

from dataclasses import replace

from cascade_plan.cost.moe_table import ROUTINGS, MoeSkew, MoeTable, skew_ratio
from cascade_plan.errors import InputError

OP = "moe_grouped_gemm"
BACKENDS = ("triton", "grouped_mm")      # in order of preference


def moe_tables(step_ops, path: str | None = None) -> tuple[MoeTable, ...]:
    groups: dict[tuple, dict[str, dict[int, dict[str, float]]]] = {}
    for i, r in enumerate(step_ops or ()):
        if not isinstance(r, dict) or r.get("op") != OP:
            continue
        try:
            c = r["config"]
            if c["routing"] not in ROUTINGS or c["backend"] not in BACKENDS or not r.get("median_s"):
                continue
            key = (int(c["k"]) if c["proj"] == "gate_up" else int(c["n"]), int(c["n"]) // 2 if c["proj"] == "gate_up"
                   else int(c["k"]), int(c["experts"]), int(c["top_k"]), str(c["dtype"]), str(c["routing"]))
            t = float(r["median_s"])
            m, proj = int(c["m"]), str(c["proj"])
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"a {OP} row lacks a readable {exc!s} (config: model, tp, proj, m, n, k, experts, "
                             "top_k, dtype, routing, backend; median_s)", file=path, field=f"step_ops[{i}]") from None
        if proj not in ("gate_up", "down") or m < 1 or not t > 0:
            raise InputError(f"a {OP} row needs proj gate_up or down, m >= 1 and a positive median_s",
                             file=path, field=f"step_ops[{i}]")
        groups.setdefault(key, {}).setdefault(c["backend"], {}).setdefault(m, {})[proj] = t
    tables = []
    for (h, ei, e, k, dtype, routing), by_backend in sorted(groups.items()):
        backend = next(b for b in BACKENDS if b in by_backend)
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


def _skews(rows, path: str | None) -> tuple[MoeSkew, ...]:
    out = []
    for i, r in enumerate(rows or ()):
        try:
            m, ratio = tuple(float(x) for x in r["m"]), tuple(float(x) for x in r["ratio"])
            s = MoeSkew(hidden=int(r["hidden"]), intermediate=int(r["intermediate"]), experts=int(r["experts"]),
                        top_k=int(r["top_k"]), dtype=str(r["dtype"]), m=m, ratio=ratio, source=str(r["source"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"a MoE skew row lacks a readable {exc!s} (hidden, intermediate, experts, top_k, dtype, "
                             "m, ratio, source)", file=path, field=f"moe_skew[{i}]") from None
        if len(m) != len(ratio) or not m or any(b <= a for a, b in zip(m, m[1:])) or not all(x > 0 for x in ratio):
            raise InputError("a MoE skew row needs ascending token counts and as many positive ratios",
                             file=path, field=f"moe_skew[{i}]")
        out.append(s)
    return tuple(out)


def aic_moe_tables(rows, path: str | None = None) -> tuple[MoeTable, ...]:
    """An imported file's `moe_rows` (calibration/aic/moe_import.py) as tables."""
    out = []
    for i, r in enumerate(rows or ()):
        try:
            m, s = tuple(float(x) for x in r["m"]), tuple(float(x) for x in r["seconds"])
            t = MoeTable(hidden=int(r["hidden"]), intermediate=int(r["intermediate"]), experts=int(r["experts"]),
                         top_k=int(r["top_k"]), dtype=str(r["dtype"]), m=m, seconds=s, backend=str(r["kernel"]),
                         routing=str(r["routing"]), origin="aic", source_dtype=str(r.get("aic_dtype", "")))
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"an AIConfigurator MoE row lacks a readable {exc!s} (hidden, intermediate, experts, "
                             "top_k, dtype, routing, kernel, m, seconds)", file=path, field=f"moe_rows[{i}]") from None
        if len(m) != len(s) or len(m) < 2 or any(b <= a for a, b in zip(m, m[1:])) or m[0] < 1 \
                or not all(x > 0 for x in s):
            raise InputError("an AIConfigurator MoE row needs ascending token counts m >= 1 and as many positive "
                             "seconds", file=path, field=f"moe_rows[{i}]")
        out.append(t)
    return tuple(out)


def with_moe_tables(parts, doc: dict, path: str | None = None):
    """StepParts with the file's measured routed-expert tables (unchanged when it has none): the probe's
    grouped-GEMM rows, and an imported file's AIConfigurator MoE rows."""
    tables = moe_tables(doc.get("step_ops"), path) + aic_moe_tables(doc.get("moe_rows"), path)
    skews = _skews(doc.get("moe_skew"), path)
    if skews:
        parts = replace(parts, moe_skew=skews)
    return replace(parts, moe=tables) if tables else parts
