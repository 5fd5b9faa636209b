"""Terminal tables for the whole MoE / MLA + MoE step validation (calibration/moe_step_validation.py)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from cascade_plan.units import fmt_pct


def render_moe_steps(res: dict | None, console: Console) -> None:
    if not res:
        return
    t = Table(title="Whole MoE and MLA + MoE decode steps on one GPU, predicted vs measured (never fitted; one GPU's "
                    "shard of a TP model, predicted without its all-reduce; * = experts never GEMM-probed)",
              title_justify="left")
    for col in ("kind", "backend", "workload", "KV", "step", "per-seq. ms", "err", "cascade ms", "err", "speedup",
                "err"):
        t.add_column(col, justify="left" if col in ("kind", "backend", "workload", "KV") else "right")
    last = None
    for p in sorted(res["points"], key=lambda p: (p["step_kind"], p["backend"], p["workload"], p["step"])):
        key = (p["step_kind"], p["backend"])
        if last is not None and key != last:
            t.add_section()
        last = key
        t.add_row(p["step_kind"], p["backend"], p["workload"] + (" *" if p["held_out_shape"] else ""), p["kv_dtype"],
                  f"{p['position']} ({p['step']})", f"{p['measured_per_sequence_s'] * 1e3:.2f}",
                  f"{100 * p['per_sequence_error']:+.1f}%", f"{p['measured_cascade_s'] * 1e3:.2f}",
                  f"{100 * p['cascade_error']:+.1f}%", f"{p['measured_speedup']:.2f}x",
                  f"{100 * p['speedup_error']:+.1f}%")
    console.print(t)
    tg = res["targets"]
    g = Table(title=f"MoE / MLA step targets: |error| median <= {tg['step_median']:.0%} and max <= "
                    f"{tg['step_max']:.0%}, speedup median <= {tg['speedup_median']:.0%}", title_justify="left")
    for col in ("kind", "backend / KV", "step n", "median", "max", "speedup median", "max", "targets"):
        g.add_column(col, justify="left" if col in ("kind", "backend / KV") else "right")
    for kind, summ in res["summary"].items():
        for b, s in summ.items():
            g.add_row(kind, b, str(s["step"]["n"]), fmt_pct(s["step"]["median"]), fmt_pct(s["step"]["max"]),
                      fmt_pct(s["speedup"]["median"]), fmt_pct(s["speedup"]["max"]),
                      "[green]met[/green]" if s["targets_met"] else "[red]missed[/red]")
    console.print(g)
