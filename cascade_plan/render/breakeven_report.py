"""The breakeven command's data (a workload's default axes, the JSON/CSV forms) and its tables."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cascade_plan.cost.breakeven import Sweep, breakeven_group_size, breakeven_prefix_tokens, sweep
from cascade_plan.cost.cost_params import CostParams
from cascade_plan.cost.flat_tree import flatten
from cascade_plan.inputs.workload import Scenario

DEFAULT_PREFIX_AXIS = "64:65536:log"
DEFAULT_BATCH_AXIS = "1:512:log"
MAX_JSON_POINTS = 200_000


@dataclass(frozen=True)
class BreakevenResult:
    scenario: Scenario
    params: CostParams
    sweep: Sweep
    prefix_at_group: np.ndarray      # [n, s] shortest winning prefix, -1 = never
    group_at_prefix: np.ndarray      # [p, s] smallest winning group, -1 = never


def workload_axes(scn: Scenario) -> tuple[int, int]:
    """(groups, suffix) a workload suggests: its sibling groups, and the private tokens a sequence
    reads at the middle of its run."""
    flat = flatten(scn.tree)
    groups = int(flat.leaf_instances.sum())
    mid = flat.leaf_private + (flat.leaf_output + 1) // 2
    return groups, int(np.average(mid, weights=flat.leaf_seqs))


def run_breakeven(scn: Scenario, params: CostParams, prefix, group, suffix, n_groups: int) -> BreakevenResult:
    sw = sweep(scn, params, prefix, group, suffix, n_groups)
    return BreakevenResult(
        scn, params, sw,
        breakeven_prefix_tokens(scn, params, group, suffix, n_groups),
        breakeven_group_size(scn, params, prefix, suffix, n_groups),
    )


def _none(v: int) -> int | None:
    return None if v < 0 else int(v)


def to_json(res: BreakevenResult, version: str) -> dict:
    sw, scn = res.sweep, res.scenario
    doc = {
        "schema_version": 1, "tool_version": version, "model": scn.model.id, "hardware": scn.hardware.id,
        "kv_dtype": scn.kv_dtype, "weight_dtype": scn.weight_dtype, "tp": scn.tp, "mode": res.params.mode,
        "calibration": {"mode": res.params.mode, "source": res.params.source, "backend": res.params.backend},
        "n_groups": sw.n_groups,
        "prefix_tokens": sw.prefix_tokens.tolist(), "group_size": sw.group_size.tolist(),
        "suffix_tokens": sw.suffix_tokens.tolist(),
        "breakeven_prefix_tokens": [
            {"group_size": int(n), "suffix_tokens": int(s), "prefix_tokens": _none(res.prefix_at_group[i, j])}
            for i, n in enumerate(sw.group_size) for j, s in enumerate(sw.suffix_tokens)],
        "breakeven_group_size": [
            {"prefix_tokens": int(p), "suffix_tokens": int(s), "group_size": _none(res.group_at_prefix[i, j])}
            for i, p in enumerate(sw.prefix_tokens) for j, s in enumerate(sw.suffix_tokens)],
    }
    if sw.speedup.size <= MAX_JSON_POINTS:
        doc["points"] = [dict(zip(("prefix_tokens", "group_size", "suffix_tokens", "per_sequence_step_s",
                                   "cascade_step_s", "speedup"), row)) for row in _rows(sw)]
    else:
        doc["points"] = None
        doc["points_note"] = f"{sw.speedup.size} points: use --csv for every point"
    return doc


def _rows(sw: Sweep) -> list[tuple]:
    p, n, s = np.meshgrid(sw.prefix_tokens, sw.group_size, sw.suffix_tokens, indexing="ij")
    cols = [p.ravel().tolist(), n.ravel().tolist(), s.ravel().tolist(), sw.per_sequence_step_s.ravel().tolist(),
            sw.cascade_step_s.ravel().tolist(), sw.speedup.ravel().tolist()]
    return list(zip(*cols))


def to_csv(res: BreakevenResult) -> str:
    sw = res.sweep
    p, n, s = np.meshgrid(sw.prefix_tokens, sw.group_size, sw.suffix_tokens, indexing="ij")
    table = np.column_stack([p.ravel(), n.ravel(), s.ravel(), sw.per_sequence_step_s.ravel(),
                             sw.cascade_step_s.ravel(), sw.speedup.ravel()])
    import io

    buf = io.StringIO()
    buf.write("prefix_tokens,group_size,suffix_tokens,per_sequence_step_s,cascade_step_s,speedup\n")
    np.savetxt(buf, table, delimiter=",", fmt=["%d", "%d", "%d", "%.6e", "%.6e", "%.5f"])
    return buf.getvalue()


def _pick(values: np.ndarray, k: int) -> list[int]:
    if values.size <= k:
        return list(range(values.size))
    return sorted({int(round(i)) for i in np.linspace(0, values.size - 1, k)})


def fmt_tokens(v: int) -> str:
    return "never" if v < 0 else f"{v:,}"


def render(res: BreakevenResult, console) -> None:
    from rich.table import Table

    sw, scn = res.sweep, res.scenario
    console.print(f"[bold]Breakeven[/bold]: {scn.model.id} on {scn.hardware.name}, KV {scn.kv_dtype}, TP {scn.tp}, "
                  f"{sw.n_groups} prompt group(s) in the batch")
    console.print(f"[dim]Numbers: {res.params.label}[/dim]")
    sfx = [f"suffix {int(s):,}" for s in sw.suffix_tokens]

    a = Table(title="Shortest shared prefix (tokens) at which cascade beats per-sequence attention", title_justify="left")
    a.add_column("sequences per group", justify="right")
    for c in sfx:
        a.add_column(c, justify="right")
    for i, n in enumerate(sw.group_size):
        a.add_row(str(n), *[fmt_tokens(res.prefix_at_group[i, j]) for j in range(len(sfx))])
    console.print(a)

    b = Table(title="Smallest group (sequences sharing the prefix) at which cascade wins", title_justify="left")
    b.add_column("shared prefix (tokens)", justify="right")
    for c in sfx:
        b.add_column(c, justify="right")
    for i, p in enumerate(sw.prefix_tokens):
        b.add_row(f"{p:,}", *[fmt_tokens(res.group_at_prefix[i, j]) for j in range(len(sfx))])
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
            cells.append(f"[{style}]{x:.2f}x[/{style}]" if style else f"{x:.2f}x")
        c.add_row(f"{sw.prefix_tokens[i]:,}", *cells)
    console.print(c)
    console.print("[dim]'never': cascade does not win anywhere up to 1M prefix tokens or 16K sequences "
                  "(a group of one shares nothing; fixed costs can outweigh small savings).[/dim]")
