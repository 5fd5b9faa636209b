"""Terminal table for the three-level tree validation (calibration/tree_validation.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table

from cascade_plan.units import fmt_pct

if TYPE_CHECKING:  # pragma: no cover
    from rich.console import Console


def render_trees(res: dict, console: Console) -> None:
    if not res.get("summary"):
        return
    t = Table(title="Three-level trees (root prefix, group prefixes, suffixes; never fitted): the planner's tree "
                    "pricing against the probe's tree rows, one layer", title_justify="left")
    for col in ("backend / KV", "kernel", "rows", "median |error|", "max", "median signed"):
        t.add_column(col, justify="left" if col in ("backend / KV", "kernel") else "right")
    for key, per in res["summary"].items():
        for i, (kernel, s) in enumerate(per.items()):
            t.add_row(key, kernel.replace("_", "-"), str(s["n"]), fmt_pct(s["median_ape"]), fmt_pct(s["max_ape"]),
                      f"{100 * s['median_signed']:+.1f}%", end_section=i == len(per) - 1)
    console.print(t)
