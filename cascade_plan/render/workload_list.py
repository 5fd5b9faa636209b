"""The `workloads` listing: the shipped example workloads, by name."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich import box
from rich.table import Table
from rich.text import Text

from cascade_plan.render.console import natural_width, written

if TYPE_CHECKING:  # pragma: no cover
    from rich.console import Console

#: Narrowest description column worth drawing beside the key columns; below it the descriptions are
#: printed under the table instead, wrapped, so that the key columns are never cut.
MIN_DESCRIPTION_COLUMNS = 30


def render_workloads(rows: list[dict], console: Console) -> None:
    header = ["name", "model", "hardware", "TP", "seqs", "checks"]
    # names and descriptions as the files write them, never read as markup ("[red]" stays text)
    cells = [[r["name"], r["model"], r["hardware"], str(r["tp"]), f"{r['sequences']:,}",
              "\n".join(r["checks"]) or "none"] for r in rows]
    gap = 1                                                     # no padding: the separator is one space
    beside = natural_width(header, cells, gap) + gap + MIN_DESCRIPTION_COLUMNS <= console.width
    t = Table(title="Shipped workloads (use the name anywhere a workload file goes)", title_justify="left",
              box=box.SIMPLE_HEAD, padding=(0, 0), pad_edge=False, show_edge=False)
    for col in header:
        t.add_column(col, no_wrap=True, justify="right" if col in ("TP", "seqs") else "left")
    if beside:
        t.add_column("what it represents", min_width=MIN_DESCRIPTION_COLUMNS, ratio=1)
    for c, r in zip(cells, rows):
        t.add_row(*map(written, c), *([written(r["description"])] if beside else []))
    console.print(t)
    if not beside:
        for r in rows:
            console.print(Text.assemble((r["name"], "bold"), ": ", r["description"]), highlight=False)
    console.print("e.g. cascade-plan estimate rl-rollouts-64; copy one to start your own: "
                  "cascade-plan workloads --path rl-rollouts-64", style="dim")
