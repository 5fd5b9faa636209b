"""Where cascade starts (and stops) paying: vectorised sweeps over prefix length x group size x
suffix length, and the exact winning ranges along each axis.

With calibrated kernels the fixed costs and the measured efficiency surfaces make cascade's win
appear, vanish and reappear along the prefix and group axes, so a breakeven is not one number: the
search scans each axis (the sweep's own grid values among the scan points, so the tables agree with
every point of the grid), bisects every crossing to the integer, and returns the winning spans."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cascade_plan.cost.capacity import DEFAULT_RESERVE_FRACTION
from cascade_plan.cost.cost_model import gpu_shape, single_level_load, step_costs
from cascade_plan.cost.cost_params import CostParams
from cascade_plan.cost.flat_tree import flatten
from cascade_plan.cost.memory_fit import MemoryFit, memory_fit, single_level_fits
from cascade_plan.inputs.workload import Scenario

# The axes a workload's breakeven is swept over when nobody gives them (`report`; `breakeven`'s option defaults).
DEFAULT_PREFIX_AXIS = "64:65536:log"
DEFAULT_BATCH_AXIS = "1:512:log"
MAX_PREFIX_TOKENS = 1 << 20
MAX_GROUP_SIZE = 1 << 14
SCAN_POINTS_PER_OCTAVE = 8

# One winning range along an axis: (first winning value, last winning value), last None when cascade
# still wins at the end of the searched range.
Span = tuple[int, "int | None"]


@dataclass(frozen=True)
class Sweep:
    """speedup[p, n, s] = per-sequence step time / cascade step time at prefix p, group n, suffix s."""

    prefix_tokens: np.ndarray
    group_size: np.ndarray
    suffix_tokens: np.ndarray
    n_groups: int
    per_sequence_step_s: np.ndarray
    cascade_step_s: np.ndarray
    fits: np.ndarray | None = None     # [p, n, s]: weights and this step's KV fit in GPU memory

    @property
    def speedup(self) -> np.ndarray:
        return self.per_sequence_step_s / self.cascade_step_s

    @property
    def wins(self) -> np.ndarray:
        """[p, n, s]: cascade's step is strictly faster (the breakevens' criterion)."""
        return self.cascade_step_s < self.per_sequence_step_s


def _costs(scn: Scenario, params: CostParams, prefix, group, n_groups, suffix):
    g = gpu_shape(scn.model, scn.hardware, scn.kv_dtype, scn.weight_dtype, scn.tp)
    load = single_level_load(prefix, group, n_groups, suffix)
    return step_costs(load, g, scn.model, scn.weight_dtype, scn.tp, params, scn.prefix_caching)


def sweep(scn: Scenario, params: CostParams, prefix_tokens, group_size, suffix_tokens, n_groups: int = 1,
          reserve_fraction: float = DEFAULT_RESERVE_FRACTION) -> Sweep:
    """One decode step of `n_groups` prompts, each shared by a group; model, GPU and dtypes from `scn`;
    `fits` marks the points whose weights and KV fit in memory less `reserve_fraction`."""
    p = np.asarray(prefix_tokens, dtype=float)[:, None, None]
    n = np.asarray(group_size, dtype=float)[None, :, None]
    s = np.asarray(suffix_tokens, dtype=float)[None, None, :]
    c = _costs(scn, params, p, n, n_groups, s)
    shape = (p.shape[0], n.shape[1], s.shape[2])
    return Sweep(np.asarray(prefix_tokens), np.asarray(group_size), np.asarray(suffix_tokens), n_groups,
                 np.broadcast_to(c.ps_step_s, shape), np.broadcast_to(c.cas_step_s, shape),
                 np.broadcast_to(single_level_fits(scn, p, n, s, n_groups, reserve_fraction), shape))


def _first_true(pred, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Smallest integer x in (lo, hi] with pred(x) true, for pred false at lo and true at hi (one
    crossing found where there are several). Bisection, vectorised over the shape of lo/hi."""
    lo, hi = lo.astype(np.int64).copy(), hi.astype(np.int64).copy()
    for _ in range(64):
        if np.all(hi - lo <= 1):
            break
        mid = (lo + hi) // 2
        ok = pred(mid)
        hi = np.where(ok, mid, hi)
        lo = np.where(ok, lo, mid)
    return hi


def scan_points(lo: int, hi: int, grid=()) -> np.ndarray:
    """Integers from lo to hi, SCAN_POINTS_PER_OCTAVE per doubling, plus every grid value in range."""
    lo, hi = int(lo), int(hi)
    start = max(lo, 1)
    octaves = max(np.log2(max(hi, 2) / start), 1.0)
    logs = np.geomspace(start, max(hi, start), int(np.ceil(octaves * SCAN_POINTS_PER_OCTAVE)) + 1)
    g = np.asarray(list(grid), dtype=float)
    pts = np.concatenate([[lo, hi], np.round(logs), g[(g >= lo) & (g <= hi)]])
    return np.unique(pts.astype(np.int64))


def winning_spans(scn: Scenario, params: CostParams, axis: str, fixed, suffix_tokens, n_groups: int, lo: int,
                  hi: int, grid=()) -> list[list[list[Span]]]:
    """[fixed][suffix]: the ranges of `axis` ("prefix" or "group") in [lo, hi] where cascade beats
    per-sequence attention, the other axis held at each of `fixed`. Every crossing between two scan
    points is bisected to the integer, so a span's ends are exact."""
    fixed_a = np.asarray(fixed, dtype=float)
    sfx = np.asarray(suffix_tokens, dtype=float)
    xs = scan_points(lo, hi, grid)

    def wins(x, other, s):
        p, n = (x, other) if axis == "prefix" else (other, x)
        c = _costs(scn, params, p, n, n_groups, s)
        return np.broadcast_to(c.cas_step_s < c.ps_step_s, np.broadcast(x, other, s).shape)

    status = wins(xs[None, None, :].astype(float), fixed_a[:, None, None], sfx[None, :, None])   # [F, S, K]
    fi, si, ki = np.nonzero(status[:, :, 1:] != status[:, :, :-1])
    target = status[fi, si, ki + 1]
    other, s = fixed_a[fi], sfx[si]
    edge = _first_true(lambda x: wins(x.astype(float), other, s) == target, xs[ki], xs[ki + 1])
    spans: list[list[list[Span]]] = [[[] for _ in sfx] for _ in fixed_a]
    start: dict[tuple[int, int], int] = {}
    for f in range(fixed_a.size):
        for j in range(sfx.size):
            if status[f, j, 0]:
                start[f, j] = int(xs[0])
    for f, j, t, e in zip(fi.tolist(), si.tolist(), target.tolist(), edge.tolist()):   # in scan order
        if t:
            start[f, j] = int(e)
        else:
            spans[f][j].append((start.pop((f, j)), int(e) - 1))
    for (f, j), a in start.items():
        spans[f][j].append((a, None))
    return spans


def first_win(spans: list[list[list[Span]]]) -> np.ndarray:
    """[fixed, suffix]: the first winning value, -1 where cascade never wins."""
    return np.array([[c[0][0] if c else -1 for c in row] for row in spans], dtype=np.int64).reshape(
        len(spans), len(spans[0]) if spans else 0)


def breakeven_prefix_tokens(scn: Scenario, params: CostParams, group_size, suffix_tokens, n_groups: int = 1,
                            max_prefix: int = MAX_PREFIX_TOKENS) -> np.ndarray:
    """[n, s]: the shortest shared prefix at which cascade is faster than per-sequence attention;
    -1 where it never is up to max_prefix (a group of one, or overheads that the savings never repay)."""
    return first_win(winning_spans(scn, params, "prefix", group_size, suffix_tokens, n_groups, 0, max_prefix))


def breakeven_group_size(scn: Scenario, params: CostParams, prefix_tokens, suffix_tokens, n_groups: int = 1,
                         max_group: int = MAX_GROUP_SIZE) -> np.ndarray:
    """[p, s]: the smallest group (sequences sharing one prefix) at which cascade is faster; -1 if none
    up to max_group."""
    return first_win(winning_spans(scn, params, "group", prefix_tokens, suffix_tokens, n_groups, 1, max_group))


@dataclass(frozen=True)
class BreakevenResult:
    scenario: Scenario
    params: CostParams
    sweep: Sweep
    prefix_at_group: np.ndarray      # [n, s] shortest winning prefix, -1 = never
    group_at_prefix: np.ndarray      # [p, s] smallest winning group, -1 = never
    prefix_at_group_fits: np.ndarray | None = None   # [n, s] that breakeven point fits in memory
    group_at_prefix_fits: np.ndarray | None = None   # [p, s]
    memory: MemoryFit | None = None  # the weights, and the budget left for KV
    prefix_spans: list | None = None  # [n][s]: every winning prefix range (Span), exact ends
    group_spans: list | None = None   # [p][s]: every winning group range


def workload_axes(scn: Scenario) -> tuple[int, int]:
    """(groups, suffix) a workload suggests: its sibling groups, and the private tokens a sequence
    reads at the middle of its run."""
    flat = flatten(scn.tree)
    groups = int(flat.leaf_instances.sum())
    mid = flat.leaf_private + (flat.leaf_output + 1) // 2
    return groups, int(np.average(mid, weights=flat.leaf_seqs))


def workload_point(scn: Scenario) -> tuple[int, int]:
    """(group size, shared prefix tokens) of the workload's largest sibling group: where it sits on a
    prefix x group sweep."""
    flat = flatten(scn.tree)
    i = int(np.argmax(flat.leaf_seqs))
    return int(flat.leaf_seqs[i] // flat.leaf_instances[i]), int(flat.leaf_shared[i])


def run_breakeven(scn: Scenario, params: CostParams, prefix, group, suffix, n_groups: int,
                  reserve_fraction: float = DEFAULT_RESERVE_FRACTION) -> BreakevenResult:
    """The sweep over the grid and both breakeven tables, searched over ranges that hold the grid."""
    sw = sweep(scn, params, prefix, group, suffix, n_groups, reserve_fraction)
    p_hi = max(MAX_PREFIX_TOKENS, int(np.max(sw.prefix_tokens, initial=0)))
    n_hi = max(MAX_GROUP_SIZE, int(np.max(sw.group_size, initial=1)))
    p_spans = winning_spans(scn, params, "prefix", group, suffix, n_groups, 0, p_hi, sw.prefix_tokens)
    n_spans = winning_spans(scn, params, "group", prefix, suffix, n_groups, 1, n_hi, sw.group_size)
    at_group, at_prefix = first_win(p_spans), first_win(n_spans)
    g, s = np.asarray(group, float)[:, None], np.asarray(suffix, float)[None, :]
    p = np.asarray(prefix, float)[:, None]
    return BreakevenResult(
        scn, params, sw, at_group, at_prefix,
        single_level_fits(scn, np.maximum(at_group, 0), g, s, n_groups, reserve_fraction),
        single_level_fits(scn, p, np.maximum(at_prefix, 1), s, n_groups, reserve_fraction),
        memory_fit(scn, reserve_fraction), p_spans, n_spans,
    )


def unfit_counts(res: BreakevenResult) -> tuple[int, int]:
    """(sweep points, breakevens found) whose step does not fit in GPU memory (0, 0 without a memory check)."""
    misses = [f for f in (res.sweep.fits, res.prefix_at_group_fits, res.group_at_prefix_fits) if f is not None]
    found = [res.prefix_at_group >= 0, res.group_at_prefix >= 0]
    bad = int((~misses[0]).sum()) if misses else 0
    bad_be = sum(int((~f & ok).sum()) for f, ok in zip(misses[1:], found))
    return bad, bad_be


def in_spans(x: int, spans: list[Span]) -> bool:
    return any(a <= x and (b is None or x <= b) for a, b in spans)


def contradictions(res: BreakevenResult) -> list[str]:
    """Every grid point where a breakeven table disagrees with the grid: a winning point outside the
    table's winning spans, or a losing one inside them. Empty when the tables hold."""
    sw, out = res.sweep, []
    wins = sw.wins
    assert res.prefix_spans is not None and res.group_spans is not None   # every breakeven() result has both
    for i, p in enumerate(sw.prefix_tokens.tolist()):
        for k, n in enumerate(sw.group_size.tolist()):
            for j, s in enumerate(sw.suffix_tokens.tolist()):
                w = bool(wins[i, k, j])
                if in_spans(int(p), res.prefix_spans[k][j]) != w:
                    out.append(f"prefix table at group {n}, suffix {s}: prefix {p} "
                               f"{'wins' if w else 'loses'} on the grid")
                if in_spans(int(n), res.group_spans[i][j]) != w:
                    out.append(f"group table at prefix {p}, suffix {s}: group {n} "
                               f"{'wins' if w else 'loses'} on the grid")
    return out
