"""The `workloads` listing: the shipped example workloads, by name."""

from __future__ import annotations


def render_workloads(rows: list[dict], console) -> None:
    from rich.table import Table

    t = Table(title="Shipped workloads (use the name anywhere a workload file goes)", title_justify="left")
    t.add_column("name", no_wrap=True)
    for col in ("model", "hardware", "TP", "sequences", "checks"):
        t.add_column(col, justify="right" if col in ("TP", "sequences") else "left")
    t.add_column("what it represents", min_width=30)
    for r in rows:
        t.add_row(r["name"], r["model"], r["hardware"], str(r["tp"]), f"{r['sequences']:,}",
                  ", ".join(r["checks"]) or "none", r["description"])
    console.print(t)
    console.print("e.g. cascade-plan estimate rl-rollouts-64; copy one to start your own: "
                  "cascade-plan workloads --path rl-rollouts-64", style="dim")
