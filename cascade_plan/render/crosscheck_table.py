"""Tables of the AIConfigurator-vs-probe cross-check (`cascade-plan validate`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich import box
from rich.table import Table

from cascade_plan.units import fmt_pct

if TYPE_CHECKING:  # pragma: no cover
    from rich.console import Console


def _num(x: float | None, unit: str) -> str:
    if x is None:
        return "not measured"
    if unit == "FLOP/s":
        return f"{x / 1e12:.0f} TFLOP/s"
    if unit == "ratio":
        return f"{x:.2f}"
    if unit == "B/s":
        return f"{x / 1e12:.2f} TB/s" if x >= 1e12 else f"{x / 1e9:.0f} GB/s"
    return f"{x * 1e6:.1f} us"


def render_crosscheck(res: dict, console: Console) -> None:
    console.print(f"\nCross-check on the {res['gpu']}: AIConfigurator ({res['aic_file']}, decode kernel "
                  f"{res['aic_kernel']}) against our probe ({res['probe_file']}); docs/aic.md explains the differences")
    t = Table(title="Per-sequence decode attention, shapes both measured (AIC time / probe time)", title_justify="left",
              box=box.SIMPLE_HEAD, caption="median ratio > 1: AIConfigurator slower; |error| = |ratio - 1|",
              caption_justify="left")
    for col in ("probe backend", "shapes", "n", "median ratio", "median |error|", "p90 |error|", "within 10%"):
        t.add_column(col, justify="left" if col in ("probe backend", "shapes") else "right", no_wrap=True)
    for backend, parts in res["decode"].items():
        for name, s in parts.items():
            if not s["n"]:
                continue
            t.add_row(backend, name, str(s["n"]), f"{s['median_ratio']:.3f}", f"{s['median_ape']:.1%}",
                      f"{s['p90_ape']:.1%}", f"{s['within_10pct']:.0%}")
    console.print(t)
    moe = any(r["what"].startswith("MoE experts") for r in res["kernels"])
    k = Table(title="GEMM, streaming and all-reduce", title_justify="left", box=box.SIMPLE_HEAD,
              caption=("MoE experts: AIConfigurator times its fused MoE layer, the probe its two grouped GEMMs"
                       if moe else None), caption_justify="left")
    for col in ("figure", "AIConfigurator", "probe", "AIC vs probe"):
        k.add_column(col, justify="left" if col == "figure" else "right")
    for r in res["kernels"]:
        unit = ("FLOP/s" if "FLOP/s" in r["what"] else "B/s" if "B/s" in r["what"] else
                "ratio" if "AIC time / probe time" in r["what"] else "s")
        k.add_row(r["what"], _num(r["aic"], unit), _num(r["probe"], unit),
                  "—" if r["ratio"] is None else fmt_pct(r["ratio"] - 1, signed=True))
    console.print(k)
    w = Table(title="Shipped workloads on this GPU, flashinfer kernels: speedup with each calibration",
              title_justify="left", box=box.SIMPLE_HEAD)
    for col in ("workload", "first step probe", "first step AIC", "final step probe", "final step AIC", "run probe",
                "run AIC", "run AIC vs probe"):
        w.add_column(col, justify="left" if col == "workload" else "right", no_wrap=True)
    for r in res["workloads"]:
        f1, fs, rs = r["first_step_speedup"], r["final_step_speedup"], r["run_speedup"]
        w.add_row(r["workload"], f"{f1['probe']:.2f}x", f"{f1['aic']:.2f}x", f"{fs['probe']:.2f}x", f"{fs['aic']:.2f}x",
                  f"{rs['probe']:.2f}x", f"{rs['aic']:.2f}x", fmt_pct(rs["aic"] / rs["probe"] - 1, signed=True))
    console.print(w)
