"""`cascade-plan compare`'s output: the side-by-side table and the CSV of the rows cost/compare.py builds."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich import box
from rich.table import Table

from cascade_plan.render.console import written

if TYPE_CHECKING:  # pragma: no cover
    from rich.console import Console

COLUMNS = ("hardware", "kv_dtype", "numbers", "kv_bytes_per_token", "weight_s", "final_per_sequence_step_s",
           "final_cascade_step_s", "run_per_sequence_s", "run_cascade_s", "run_speedup", "max_sequences_fit", "fits",
           "verdict")


def rows_csv(rows: list[dict]) -> str:
    """The rows as CSV, the figures unformatted (SI units, as --json has them)."""
    lines = [",".join(COLUMNS)]
    lines += [",".join(str(r[c]) for c in COLUMNS) for r in rows]
    return "\n".join(lines) + "\n"


def render_compare(name: str, rows: list[dict], console: Console) -> None:
    header = ["GPU", "KV", "numbers", "final\nps ms", "final\ncas ms", "run\nps s", "run\ncas s", "run\nspeedup",
              "seqs\nfit", "verdict"]
    cells = []
    for r in rows:
        # A configuration that cannot run gets no speedup: its times are hypothetical.
        rng = r["speedup_range"]
        speedup = ("-" if not r["fits"] else f"{rng[0]:.2f}-{rng[1]:.2f}x" if rng else f"{r['run_speedup']:.2f}x")
        # default-efficiency rows: a range, dimmed, and the word itself; never a crisp figure
        verdict = f"{r['verdict']} (uncalibrated)" if r["uncalibrated"] else (
            f"{r['verdict']} (extrapolated)" if rng and r["fits"] else r["verdict"])
        cells.append([r["hardware"], r["kv_dtype"], r["numbers"], f"{r['final_per_sequence_step_s'] * 1e3:.1f}",
                      f"{r['final_cascade_step_s'] * 1e3:.1f}", f"{r['run_per_sequence_s']:.3g}",
                      f"{r['run_cascade_s']:.3g}", speedup, f"{r['max_sequences_fit']:,}", verdict])
    # Every column holds an id, a number or a verdict, so none may be cut: headers are stacked no wider
    # than their numbers, and on a terminal still too narrow the numbers id breaks at its '/'.
    widths = [max(len(line) for cell in col for line in cell.split("\n")) for col in zip(header, *cells)]
    if sum(widths) + len(widths) - 1 > console.width:           # one-space separators, no padding
        cells = [[*c[:2], c[2].replace("/", "/\n"), *c[3:]] for c in cells]
        # still too narrow: the verdict's qualifier goes on its own line, abbreviated (a legend follows)
        cells = [[*c[:9], c[9].replace(" (uncalibrated)", "\n(uncal.)").replace(" (extrapolated)", "\n(extrap.)")]
                 for c in cells]
    t = Table(title=written(f"{name}: side by side (ps = per-sequence, cas = cascade)"), title_justify="left",
              caption="numbers per row: ideal, default (uncalibrated), probe/<backend> (measured on that GPU) or "
                      "aic/<backend> (AIConfigurator's tables, cascade kernels transferred from the H200 probe); "
                      "`estimate --help` explains each", caption_justify="left", box=box.SIMPLE_HEAD, padding=(0, 0),
              pad_edge=False, show_edge=False)
    for i, col in enumerate(header):
        t.add_column(col, justify="left" if i < 3 or i == 9 else "right", no_wrap=True)
    for c, r in zip(cells, rows):
        t.add_row(*map(written, c), style="dim" if r["uncalibrated"] else None)     # ids as written, never markup
    console.print(t)
    if any(r["uncalibrated"] for r in rows):
        console.print("uncalibrated rows (dimmed): default efficiencies, not measured kernels; their speedup is the "
                      "range the defaults' measured error allows (`estimate --help`).")
    for r in rows:   # the rows without a verdict say why
        if r["verdict"] in ("does-not-fit", "undecided"):
            console.print(written(f"{r['hardware']} {r['kv_dtype']}: {r['verdict_text']}"))
