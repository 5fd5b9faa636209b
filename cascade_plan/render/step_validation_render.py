"""Terminal tables for the whole-step validation (calibration/step_validation.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table

from cascade_plan.units import fmt_pct

if TYPE_CHECKING:  # pragma: no cover
    from rich.console import Console


def render_steps(res: dict, console: Console) -> None:
    if not res["points"]:
        console.print("[dim]No whole-step rows in this calibration (run `cascade-plan probe --step`).[/dim]")
        return
    t = Table(title="Whole decode steps on the GPU, predicted vs measured (never fitted; held-out shape = GEMMs "
                    "never probed for that model)", title_justify="left")
    for col in ("backend", "workload", "model", "TP", "step", "per-seq. ms", "err", "cascade ms", "err",
                "speedup", "err"):
        t.add_column(col, justify="left" if col in ("backend", "workload", "model") else "right")
    last = None
    for p in sorted(res["points"], key=lambda p: (p["backend"], p["workload"], p["tp"], p["step"])):
        if last is not None and p["backend"] != last:
            t.add_section()
        last = p["backend"]
        t.add_row(p["backend"], p["workload"], p["model"] + (" *" if p["held_out_shape"] else ""), str(p["tp"]),
                  f"{p['position']} ({p['step']})", f"{p['measured_per_sequence_s'] * 1e3:.2f}",
                  f"{100 * p['per_sequence_error']:+.1f}%", f"{p['measured_cascade_s'] * 1e3:.2f}",
                  f"{100 * p['cascade_error']:+.1f}%", f"{p['measured_speedup']:.2f}x",
                  f"{100 * p['speedup_error']:+.1f}%")
    console.print(t)
    r = Table(title="Run speedup per stepped workload (trapezoid over the measured steps, both sides)",
              title_justify="left")
    for col in ("backend", "workload", "TP", "measured", "predicted", "err"):
        r.add_column(col, justify="left" if col in ("backend", "workload") else "right")
    for x in res["run_speedups"]:
        r.add_row(x["backend"], x["workload"], str(x["tp"]), f"{x['measured_speedup']:.2f}x",
                  f"{x['predicted_speedup']:.2f}x", f"{100 * x['error']:+.1f}%")
    console.print(r)
    tg = res["targets"]
    g = Table(title=f"Step targets (steps outside the regimes below): |error| median <= {tg['step_median']:.0%} and "
                    f"max <= {tg['step_max']:.0%}, "
                    f"speedup median <= {tg['speedup_median']:.0%}", title_justify="left")
    for col in ("backend", "step n", "median", "max", "held-out shape median", "max", "speedup median", "max",
                "targets"):
        g.add_column(col, justify="left" if col == "backend" else "right")
    for b, s in res["summary"].items():
        g.add_row(b, str(s["step"]["n"]), fmt_pct(s["step"]["median"]), fmt_pct(s["step"]["max"]),
                  fmt_pct(s["step_held_out_shape"]["median"]), fmt_pct(s["step_held_out_shape"]["max"]),
                  fmt_pct(s["speedup"]["median"]), fmt_pct(s["speedup"]["max"]),
                  "[green]met[/green]" if s["targets_met"] else "[red]missed[/red]")
    console.print(g)
    regimes = res.get("regimes") or {}
    if regimes:
        tr = res["regime_targets"]
        q = Table(title="Held-out steps in the regimes (small models at large batch, head dims 64/256, query groups "
                        "of 6/12, prefixes over 64K, suffixes over 4K): targets |error| median <= "
                        f"{tr['step_median']:.0%}, max <= {tr['step_max']:.0%}, "
                        f"speedup median <= {tr['speedup_median']:.0%}",
                  title_justify="left")
        for col in ("backend / KV", "steps", "median", "max", "worst at", "speedup median", "max", "targets"):
            q.add_column(col, justify="left" if col in ("backend / KV", "worst at") else "right")
        for b, s in regimes.items():
            w = s["worst"]
            q.add_row(b, str(s["step"]["n"]), fmt_pct(s["step"]["median"]), fmt_pct(s["step"]["max"]),
                      f"{w['workload']} {w['position']} {w['mode'].replace('_', '-')}", fmt_pct(s["speedup"]["median"]),
                      fmt_pct(s["speedup"]["max"]), "[green]met[/green]" if s["targets_met"] else "[red]missed[/red]")
        console.print(q)
