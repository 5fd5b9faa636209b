"""`cascade-plan capacity`'s output: the ranked candidates (80 columns), the answer and the launch line."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich import box
from rich.table import Table
from rich.text import Text

from cascade_plan.serving.capacity_search import TARGET_WORDS, UNCALIBRATED_BACKEND, Candidate, SearchResult
from cascade_plan.units import fmt_seconds

if TYPE_CHECKING:  # pragma: no cover
    from rich.console import Console

    from cascade_plan.serving.capacity_answer import Launch

SHORT_BACKEND = {"flashinfer-fa2": "fi-fa2", UNCALIBRATED_BACKEND: "default"}
SHORT_SOURCE = {"calibrated": "cal", "imported": "imp", "uncalibrated": "unc"}
SHORT_TARGET = {"tpot_s": "tpot", "worst_step_s": "worst", "rollout_s": "rollout", "min_tokens_per_s": "tok/s"}


def targets_line(result: SearchResult) -> str:
    given = result.targets.given()
    if not given:
        return "no targets given: every configuration that fits meets them; ranked by GPUs, then tokens/s per GPU"
    parts = [f"{TARGET_WORDS[k]} <= {fmt_seconds(v)}" if k != "min_tokens_per_s" else f"tokens/s >= {v:,.0f}"
             for k, v in given.items()]
    return "targets: " + ", ".join(parts)


def _meets_cell(c: Candidate) -> str:
    if not c.fits:
        return "no fit"
    if c.meets:
        return "yes*" if c.source == "uncalibrated" else "yes"
    return SHORT_TARGET[max(c.misses, key=lambda m: m[1])[0]]


def _ms(s: float) -> str:
    return f"{s * 1e3:,.1f}" if s < 10 else f"{s * 1e3:,.0f}"


def render_capacity(result: SearchResult, console: Console, top: int = 12) -> None:
    console.print(Text(f"{result.workload} ({result.model}): {len(result.candidates):,} configurations searched"))
    console.print(Text(targets_line(result)))
    t = Table(box=box.SIMPLE_HEAD, padding=(0, 1, 0, 0), pad_edge=False, show_edge=False)
    for name, justify in (("GPU", "left"), ("TP", "right"), ("kernels", "left"), ("KV", "left"), ("casc", "left"),
                          ("seqs", "right"), ("waves", "right"), ("TPOT\nms", "right"), ("rollout", "right"),
                          ("tok/s\n/GPU", "right"), ("src", "left"), ("meets", "left")):
        t.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    shown = result.candidates[:top]
    for c in shown:
        t.add_row(c.hardware, str(c.tp), SHORT_BACKEND.get(c.backend, c.backend), c.kv_dtype,
                  "on" if c.cascade else "off", f"{c.sequences:,}", str(c.waves), _ms(c.tpot_s),
                  fmt_seconds(c.rollout_s), f"{c.tokens_per_s_per_gpu:,.0f}", SHORT_SOURCE[c.source], _meets_cell(c),
                  style="dim" if c.source == "uncalibrated" else None)
    console.print(t)
    if len(result.candidates) > top:
        console.print(f"({len(result.candidates) - top:,} more: --top N shows more, --json lists all)")
    console.print("src: cal = our probe on that GPU, imp = AIConfigurator's tables (cascade kernels transferred), "
                  "unc = default efficiencies; yes* = met across the whole measured error of the defaults. meets: "
                  "the first target missed, or 'no fit' (the wave does not fit in memory). fi-fa2 = flashinfer-fa2.",
                  style="dim")


def render_answer(answer: str, launch: Launch | None, console: Console) -> None:
    console.print(Text("Answer: " + answer, style="bold"))
    if launch is None:
        return
    console.print(Text("Launch: " + launch.command))
    for line in (launch.gate, launch.kernels, launch.verdict, launch.numerics, launch.sglang):
        if line:
            console.print(Text("  " + line))


def render_notes(notes: list[str], console: Console) -> None:
    for n in notes:
        console.print(Text("note: " + n, style="dim"))
