"""The same workload on several GPUs / KV dtypes: rows for the compare table."""

from __future__ import annotations

import numpy as np

from cascade_plan.cost.cost_params import CostParams
from cascade_plan.cost.estimate import estimate
from cascade_plan.errors import InputError
from cascade_plan.inputs.workload import Scenario

# Node x segment cells priced over all rows: a run prices every shared node in every segment of steps
# between two output lengths (run_load), ~0.1 us a cell on one core. 24M keeps a compare within ~3 s.
MAX_COMPARE_CELLS = 24_000_000


def check_compare_size(scns: list[Scenario]) -> None:
    """Refuse, before pricing anything, a compare whose rows x (nodes x distinct output lengths) would
    take more than seconds; a single `estimate` of the same tree is never refused here."""
    from cascade_plan.cost.flat_tree import flatten

    if len(scns) <= 1:
        return
    cells_by_tree: dict[int, int] = {}
    total = 0
    for scn in scns:
        key = id(scn.tree)
        if key not in cells_by_tree:
            flat = flatten(scn.tree)
            cells_by_tree[key] = max(1, flat.node_tokens.size) * np.unique(flat.leaf_output).size
        total += cells_by_tree[key]
    if total > MAX_COMPARE_CELLS:
        per = max(cells_by_tree.values())
        raise InputError(f"{len(scns)} configurations of a tree this wide ({per:,} node x output-length cells each) "
                         f"are {total:,} cells to price, more than the {MAX_COMPARE_CELLS:,} one compare handles in "
                         f"seconds: compare at most {max(1, MAX_COMPARE_CELLS // per)} GPU x KV dtype pairs at once, "
                         "or `estimate` each")

COLUMNS = ("hardware", "kv_dtype", "numbers", "kv_bytes_per_token", "weight_s", "final_per_sequence_step_s",
           "final_cascade_step_s", "run_per_sequence_s", "run_cascade_s", "run_speedup", "max_sequences_fit", "fits",
           "verdict")


def compare_rows(scns: list[Scenario], params: list[CostParams], estimator=estimate) -> list[dict]:
    """One row per scenario; `estimator` is `estimate` or anything with its signature that returns an
    Estimate (the CLI passes one that attaches the verdict's evidence)."""
    check_compare_size(scns)
    rows = []
    for scn, p in zip(scns, params):
        est = estimator(scn, p)
        rows.append({
            "hardware": scn.hardware.id, "kv_dtype": scn.kv_dtype,
            "numbers": p.numbers, "numbers_label": p.label, "kv_bytes_per_token": est.kv_bytes_per_token,
            "weight_s": est.steps[0].weight_s, "final_per_sequence_step_s": est.final_step.per_sequence.step_s,
            "final_cascade_step_s": est.final_step.cascade.step_s, "run_per_sequence_s": est.run_per_sequence_s,
            "run_cascade_s": est.run_cascade_s, "run_speedup": est.run_speedup,
            "max_sequences_fit": est.memory.max_sequences, "fits": est.memory.fits,
            "verdict": est.verdict.level, "verdict_text": est.verdict.text,
            "speedup_range": list(est.verdict.speedup_range) if est.verdict.speedup_range else None,
            "uncalibrated": p.mode == "default",
        })
    return rows


def rows_csv(rows: list[dict]) -> str:
    lines = [",".join(COLUMNS)]
    lines += [",".join(str(r[c]) for c in COLUMNS) for r in rows]
    return "\n".join(lines) + "\n"


def render_compare(name: str, rows: list[dict], console) -> None:
    from rich import box
    from rich.table import Table

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
    t = Table(title=f"{name}: side by side (ps = per-sequence, cas = cascade)", title_justify="left",
              caption="numbers per row: ideal, default (uncalibrated), probe/<backend> (measured on that GPU) or "
                      "aic/<backend> (AIConfigurator's tables, cascade kernels transferred from the H200 probe); "
                      "`estimate --help` explains each", caption_justify="left", box=box.SIMPLE_HEAD, padding=(0, 0),
              pad_edge=False, show_edge=False)
    for i, col in enumerate(header):
        t.add_column(col, justify="left" if i < 3 or i == 9 else "right", no_wrap=True)
    for c, r in zip(cells, rows):
        t.add_row(*c, style="dim" if r["uncalibrated"] else None)
    console.print(t)
    if any(r["uncalibrated"] for r in rows):
        console.print("uncalibrated rows (dimmed): default efficiencies, not measured kernels; their speedup is the "
                      "range the defaults' measured error allows (`estimate --help`).")
    for r in rows:   # the rows without a verdict say why
        if r["verdict"] in ("does-not-fit", "undecided"):
            console.print(f"{r['hardware']} {r['kv_dtype']}: {r['verdict_text']}")
