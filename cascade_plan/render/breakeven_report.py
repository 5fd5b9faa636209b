"""The breakeven command's output: the JSON/CSV forms and its tables (the search is cost/breakeven.py)."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

import numpy as np
from rich.markup import escape
from rich.table import Table

from cascade_plan.cost.breakeven import BreakevenResult, Sweep, unfit_counts
from cascade_plan.envelope import envelope
from cascade_plan.units import fmt_bytes_binary

if TYPE_CHECKING:  # pragma: no cover
    from rich.console import Console

MAX_JSON_POINTS = 200_000


def _none(v: int) -> int | None:
    return None if v < 0 else int(v)


def _spans_json(spans: list | None, i: int, j: int) -> list[dict] | None:
    if spans is None:
        return None
    return [{"from": a, "to": b} for a, b in spans[i][j]]


def _fit_at(fits: np.ndarray | None, i: int, j: int, found: int) -> bool | None:
    return None if fits is None or found < 0 else bool(fits[i, j])


def to_json(res: BreakevenResult, version: str | None = None) -> dict:
    sw, scn = res.sweep, res.scenario
    doc = {
        **envelope(tool_version=version), "model": scn.model.id, "hardware": scn.hardware.id,
        "kv_dtype": scn.kv_dtype, "weight_dtype": scn.weight_dtype, "tp": scn.tp, "mode": res.params.mode,
        "calibration": {"mode": res.params.mode, "source": res.params.source, "backend": res.params.backend,
                        "numbers": res.params.numbers, "label": res.params.label},
        "n_groups": sw.n_groups,
        "wins_note": "wins: every range of the axis where cascade's step is faster, ends included (to null: "
                     "still faster at the end of the searched range); the first range starts at the breakeven",
        "prefix_tokens": sw.prefix_tokens.tolist(), "group_size": sw.group_size.tolist(),
        "suffix_tokens": sw.suffix_tokens.tolist(),
        "memory": _memory_json(res),
        "breakeven_prefix_tokens": [
            {"group_size": int(n), "suffix_tokens": int(s), "prefix_tokens": _none(res.prefix_at_group[i, j]),
             "fits": _fit_at(res.prefix_at_group_fits, i, j, res.prefix_at_group[i, j]),
             "wins": _spans_json(res.prefix_spans, i, j)}
            for i, n in enumerate(sw.group_size) for j, s in enumerate(sw.suffix_tokens)],
        "breakeven_group_size": [
            {"prefix_tokens": int(p), "suffix_tokens": int(s), "group_size": _none(res.group_at_prefix[i, j]),
             "fits": _fit_at(res.group_at_prefix_fits, i, j, res.group_at_prefix[i, j]),
             "wins": _spans_json(res.group_spans, i, j)}
            for i, p in enumerate(sw.prefix_tokens) for j, s in enumerate(sw.suffix_tokens)],
    }
    if sw.speedup.size <= MAX_JSON_POINTS:
        doc["points"] = [dict(zip(("prefix_tokens", "group_size", "suffix_tokens", "per_sequence_step_s",
                                   "cascade_step_s", "speedup", "fits"), row)) for row in _rows(sw)]
    else:
        doc["points"] = None
        doc["points_note"] = f"{sw.speedup.size} points: use --csv for every point"
    return doc


def _memory_json(res: BreakevenResult) -> dict | None:
    m = res.memory
    if m is None:
        return None
    return {"weights_fit": m.weights_fit, "weight_bytes": m.weight_bytes, "kv_budget_bytes": m.kv_budget_bytes,
            "reserve_fraction": m.reserve_fraction,
            "note": "fits: whether the weights and that step's KV (each prompt's prefix once, every sequence's "
                    "suffix) fit in GPU memory after the reserve"}


def _fits(sw: Sweep) -> np.ndarray:
    return sw.fits if sw.fits is not None else np.ones(sw.speedup.shape, bool)


def _rows(sw: Sweep) -> list[tuple]:
    p, n, s = np.meshgrid(sw.prefix_tokens, sw.group_size, sw.suffix_tokens, indexing="ij")
    cols = [p.ravel().tolist(), n.ravel().tolist(), s.ravel().tolist(), sw.per_sequence_step_s.ravel().tolist(),
            sw.cascade_step_s.ravel().tolist(), sw.speedup.ravel().tolist(), _fits(sw).ravel().tolist()]
    return list(zip(*cols))


def to_csv(res: BreakevenResult) -> str:
    sw = res.sweep
    p, n, s = np.meshgrid(sw.prefix_tokens, sw.group_size, sw.suffix_tokens, indexing="ij")
    table = np.column_stack([p.ravel(), n.ravel(), s.ravel(), sw.per_sequence_step_s.ravel(),
                             sw.cascade_step_s.ravel(), sw.speedup.ravel(), _fits(sw).ravel()])
    buf = io.StringIO()
    buf.write("prefix_tokens,group_size,suffix_tokens,per_sequence_step_s,cascade_step_s,speedup,fits\n")
    np.savetxt(buf, table, delimiter=",", fmt=["%d", "%d", "%d", "%.6e", "%.6e", "%.5f", "%d"])
    return buf.getvalue()


def _pick(values: np.ndarray, k: int) -> list[int]:
    if values.size <= k:
        return list(range(values.size))
    return sorted({int(round(i)) for i in np.linspace(0, values.size - 1, k)})


def fmt_tokens(v: int, fits: bool = True) -> str:
    return "never" if v < 0 else f"{v:,}" + ("" if fits else " (no fit)")


def _cell_fits(fits: np.ndarray | None, i: int, j: int) -> bool:
    return True if fits is None else bool(fits[i, j])


def fmt_spans(spans: list, fits: bool = True) -> str:
    """Winning ranges in words: 'never', '1,009' (wins from there on), '1,009 to 4,096' (loses again
    above), '1,009 to 4,096, from 9,001' (and wins again); '(no fit)' where the first win does not fit."""
    if not spans:
        return "never"
    parts = []
    for k, (a, b) in enumerate(spans):
        if b is None:
            parts.append(f"{a:,}" if k == 0 else f"from {a:,}")
        else:
            parts.append(f"{a:,}" if a == b else f"{a:,} to {b:,}")
    return ", ".join(parts) + ("" if fits else " (no fit)")


def breakeven_cell(values: np.ndarray, fits: np.ndarray | None, i: int, j: int, spans: list | None = None) -> str:
    """One breakeven for a table: tokens or 'never', every winning range where cascade loses again
    (`spans`), marked '(no fit)' where the first win does not fit in memory."""
    if spans is not None:
        return fmt_spans(spans[i][j], _cell_fits(fits, i, j))
    return fmt_tokens(values[i, j], _cell_fits(fits, i, j))


def memory_line(res: BreakevenResult) -> str | None:
    """One sentence on memory for the breakeven output, or None when every point shown fits."""
    m = res.memory
    if m is None:
        return None
    if not m.weights_fit:
        return f"No point of this sweep runs: {m.reason}."
    bad, bad_be = unfit_counts(res)
    if not bad and not bad_be:
        return None
    return (f"{bad:,} of {res.sweep.speedup.size:,} sweep points and {bad_be} breakevens need more KV (each prompt's "
            f"prefix once, every sequence's suffix) than the {fmt_bytes_binary(m.kv_budget_bytes)} left per GPU after "
            f"the weights and a {m.reserve_fraction:.0%} reserve: the engine could not run them as one batch "
            "(marked '(no fit)').")


def render(res: BreakevenResult, console: Console) -> None:
    sw, scn = res.sweep, res.scenario
    # the model's and the profile's names as written: escaped, never read as markup or emoji codes
    console.print(f"[bold]Breakeven[/bold]: {escape(scn.model.id)} on {escape(scn.hardware.name)}, KV {scn.kv_dtype}, "
                  f"TP {scn.tp}, {sw.n_groups} prompt group(s) in the batch", emoji=False)
    console.print(f"[dim]Numbers: {escape(res.params.label)}[/dim]", emoji=False)
    sfx = [f"suffix {int(s):,}" for s in sw.suffix_tokens]

    a = Table(title="Shortest shared prefix (tokens) at which cascade beats per-sequence attention",
              title_justify="left")
    a.add_column("sequences per group", justify="right")
    for label in sfx:
        a.add_column(label, justify="right")
    for i, n in enumerate(sw.group_size):
        a.add_row(str(n), *[breakeven_cell(res.prefix_at_group, res.prefix_at_group_fits, i, j,
                                           res.prefix_spans) for j in range(len(sfx))])
    console.print(a)

    b = Table(title="Smallest group (sequences sharing the prefix) at which cascade wins", title_justify="left")
    b.add_column("shared prefix (tokens)", justify="right")
    for label in sfx:
        b.add_column(label, justify="right")
    for i, p in enumerate(sw.prefix_tokens):
        b.add_row(f"{p:,}", *[breakeven_cell(res.group_at_prefix, res.group_at_prefix_fits, i, j,
                                                res.group_spans) for j in range(len(sfx))])
    console.print(b)

    rows, cols = _pick(sw.prefix_tokens, 8), _pick(sw.group_size, 7)
    c = Table(title=f"Speedup of one decode step at representative points ({sfx[0]} tokens per sequence)",
              title_justify="left")
    c.add_column("prefix \\ group", justify="right")
    for j in cols:
        c.add_column(str(sw.group_size[j]), justify="right")
    for i in rows:
        cells = []
        for j in cols:
            x = sw.speedup[i, j, 0]
            style = "green" if x >= 1.05 else ("red" if x < 0.995 else "")
            if not _fits(sw)[i, j, 0]:
                style, text = "dim", f"({x:.2f}x)"
            else:
                text = f"{x:.2f}x"
            cells.append(f"[{style}]{text}[/{style}]" if style else text)
        c.add_row(f"{sw.prefix_tokens[i]:,}", *cells)
    console.print(c)
    console.print("[dim]'never': cascade does not win anywhere up to 1M prefix tokens or 16K sequences "
                  "(a group of one shares nothing; fixed costs can outweigh small savings). 'A to B': cascade "
                  "wins from A to B and loses again above; 'from C': wins again from C. Speedups in "
                  "parentheses: that point does not fit in GPU memory.[/dim]")
    line = memory_line(res)
    if line:
        console.print(f"[yellow]Memory: {line}[/yellow]")
