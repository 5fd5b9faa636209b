"""The decode steps of a whole run over a sharing tree, in memory that does not grow with token counts.

Between two consecutive output lengths of the tree's leaves (a *segment* of steps) the same sequences
decode, so every shared node has the same readers and only the private suffixes grow, one token per
step. The load is therefore built per segment (node terms: nodes x segments, never nodes x steps or
nodes x leaves) and per step only where it changes (suffix lengths). A run is summed exactly, step by
step, while each segment has at most `points` steps; a longer segment is summed with the trapezoid
rule over `points` evenly spaced steps (its end steps included), which is exact for a load linear in
the step and within a fraction of a percent of the step-by-step sum for the rooflines here
(tests/test_robustness.py::test_run_sum_over_sampled_steps_matches_the_step_by_step_sum holds it to 1e-4 on a
30,000-step run; benchmarks/run_quadrature_error.py measures it on runs of up to 200,000 steps).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec
import numpy as np

from cascade_plan.cost.cost_model import GpuShape, StepCosts, StepLoad, step_costs
from cascade_plan.cost.cost_params import CostParams
from cascade_plan.cost.flat_tree import FlatTree
from cascade_plan.cost.ops.base import OpCost, distinct, map_arrays
from cascade_plan.inputs.model_spec import ModelSpec

OP_FIELDS = ("ps_ops", "cas_ops")   # StepCosts' op lists: each op's arrays go where the other arrays go
POINT_BUDGET = 8192          # evaluated steps per run (every step of runs up to about this long)
CHUNK_ELEMENTS = 1_000_000   # largest node x segment or segment x point array built at once


class RunCosts(msgspec.Struct, frozen=True):
    """Step costs at chosen decode steps of a run, and the weights that sum them into the whole run."""

    costs: StepCosts             # arrays over the evaluated steps (costs.steps, ascending)
    weights: np.ndarray          # run total of any per-step x = (x * weights).sum()
    decode_steps: int            # steps of the whole run (the longest output)

    def run_total(self, per_step: np.ndarray) -> float:
        return float((np.asarray(per_step, float) * self.weights).sum())


def segment_ends(flat: FlatTree) -> np.ndarray:
    """Last step of each segment: the distinct output lengths, ascending."""
    return distinct(flat.leaf_output)


def quadrature(flat: FlatTree, budget: int = POINT_BUDGET) -> tuple[np.ndarray, np.ndarray]:
    """Steps to evaluate and their weights: every step of a segment up to `budget / segments` steps
    long, else trapezoid points (sum of weights = steps of the segment; exact for a linear load)."""
    ends = segment_ends(flat)
    starts = np.concatenate([[1.0], ends[:-1] + 1])
    per_seg = max(2, budget // max(ends.size, 1))
    steps, weights = [], []
    for a, b in zip(starts, ends):
        n = int(b - a) + 1
        if n <= per_seg:
            steps.append(np.arange(a, b + 1))
            weights.append(np.ones(n))
            continue
        x = distinct(np.round(np.linspace(a, b, per_seg)))
        w = np.empty(x.size)
        w[1:-1] = (x[2:] - x[:-2]) / 2
        w[0] = (x[1] - x[0]) / 2 + 0.5
        w[-1] = (x[-1] - x[-2]) / 2 + 0.5
        steps.append(x)
        weights.append(w)
    return np.concatenate(steps), np.concatenate(weights)


def _suffix_reduce(order_key: np.ndarray, values: list[np.ndarray], maxima: list[np.ndarray], ends: np.ndarray):
    """Per segment (ending at each of `ends`), sums and maxima over the leaves still decoding
    (output >= segment end), from one sort of the leaves by output."""
    order = np.argsort(order_key, kind="stable")
    first = np.searchsorted(order_key[order], ends, side="left")     # first leaf still active, per segment
    sums = []
    for v in values:
        tail = np.concatenate([np.cumsum(v[order][::-1])[::-1], [0.0]])
        sums.append(tail[first])
    maxs = []
    for v in maxima:
        tail = np.concatenate([np.maximum.accumulate(v[order][::-1])[::-1], [0.0]])
        maxs.append(tail[first])
    return sums, maxs


def _node_readers(flat: FlatTree, ends: np.ndarray, segs: np.ndarray) -> np.ndarray:
    """(J, len(segs)): sequences under one instance of each node still decoding in each segment,
    from the sparse node-leaf pairs (one sort; no node x leaf or node x step matrix)."""
    n_nodes = flat.node_tokens.size
    if n_nodes == 0:
        return np.zeros((0, segs.size))
    # pair p still decodes in segment s while s < last[p]
    last = np.searchsorted(ends, flat.leaf_output[flat.pair_leaf], side="right")
    span = ends.size + 1
    key = flat.pair_node * span + last
    order = np.argsort(key, kind="stable")
    key, cum = key[order], np.concatenate([[0.0], np.cumsum(flat.pair_seqs[order])])
    node_total = cum[np.searchsorted(key, (np.arange(n_nodes) + 1) * span, side="left")]
    ended = cum[np.searchsorted(key, np.arange(n_nodes)[:, None] * span + segs[None, :], side="right")]
    return node_total[:, None] - ended


def _broadcast(costs: StepCosts, shape: tuple, keep: np.ndarray) -> dict:
    """Every array field of `costs` broadcast to the (segments, points) grid, valid points only."""
    out = {}

    def grid(x):
        return np.broadcast_to(np.asarray(x, float), shape)[keep]

    for name in costs.__struct_fields__:
        v = getattr(costs, name)
        if isinstance(v, np.ndarray) or np.isscalar(v):
            out[name] = grid(v)
        elif name in OP_FIELDS:
            out[name] = tuple(map_arrays(op, grid) for op in v)
        else:
            out[name] = v
    return out


def _chunk_loads(flat: FlatTree, steps: np.ndarray):
    """The load of the given decode steps (ascending, 1-based), in chunks of (segments, points): yields
    (load, grid of steps, which grid points are real steps)."""
    ends = segment_ends(flat)
    seg_of = np.searchsorted(ends, steps, side="left")              # segment each step lies in
    used, first, counts = np.unique(seg_of, return_index=True, return_counts=True)
    width = int(counts.max())
    row_of = np.searchsorted(used, seg_of)
    rank = np.arange(steps.size) - first[row_of]                    # position of each step in its segment
    seqs = flat.leaf_seqs
    (act, prefix_tok, private_tok), (ctx_max, priv_max) = _suffix_reduce(
        flat.leaf_output, [seqs, seqs * flat.leaf_shared, seqs * flat.leaf_private],
        [flat.leaf_shared + flat.leaf_private, flat.leaf_private], ends)
    per_node = (flat.node_instances * flat.node_tokens)[:, None, None]
    n_levels = flat.n_levels
    by_level = np.argsort(flat.node_level, kind="stable")
    level_start = np.searchsorted(flat.node_level[by_level], np.arange(n_levels))
    rows_per_chunk = max(1, min(CHUNK_ELEMENTS // max(flat.node_tokens.size, 1), CHUNK_ELEMENTS // width))
    for c0 in range(0, used.size, rows_per_chunk):
        segs = used[c0:c0 + rows_per_chunk]
        # step of each (segment, point); a segment with fewer points repeats its last step (not kept)
        last_step = steps[first[c0:c0 + segs.size] + counts[c0:c0 + segs.size] - 1]
        grid = np.repeat(last_step[:, None], width, axis=1)
        keep = np.zeros((segs.size, width), dtype=bool)
        mine = (row_of >= c0) & (row_of < c0 + segs.size)
        grid[row_of[mine] - c0, rank[mine]] = steps[mine]
        keep[row_of[mine] - c0, rank[mine]] = True
        readers = _node_readers(flat, ends, segs)[:, :, None]
        on = readers > 0
        levels_on = np.zeros((segs.size, 1))
        if n_levels:       # levels with at least one node read: nodes sorted by level, one OR per level
            lvl = np.logical_or.reduceat(on[by_level, :, 0], level_start, axis=0)
            levels_on = lvl.sum(0)[:, None].astype(float)
        a = act[segs][:, None]
        load = StepLoad(
            active_seqs=a, ps_prefix_tokens=prefix_tok[segs][:, None],
            suffix_tokens=private_tok[segs][:, None] + a * grid,
            node_tokens=per_node * on, node_query_tokens=per_node * readers,
            node_redundant_tokens=per_node * np.maximum(readers - 1, 0), levels_on=levels_on,
            node_instance_tokens=flat.node_tokens[:, None, None] * on,
            longest_context=ctx_max[segs][:, None] + grid, longest_suffix=priv_max[segs][:, None] + grid,
        )
        yield load, grid, keep


def _merged(parts: list[dict]) -> StepCosts:
    merged: dict[str, Any] = {k: (np.concatenate([p[k] for p in parts]) if isinstance(parts[0][k], np.ndarray)
                                  else parts[0][k]) for k in parts[0]}
    for k in OP_FIELDS:
        merged[k] = tuple(_joined([p[k][i] for p in parts]) for i in range(len(parts[0][k])))
    return StepCosts(**merged)


def _joined(ops: list[OpCost]) -> OpCost:
    """One op's costs over several chunks of steps (one name, one list layout: the same model and parameters)."""
    if len(ops) == 1:
        return ops[0]
    sources = list(dict.fromkeys(op.source for op in ops))
    out = OpCost(name=ops[0].name, bytes=np.concatenate([op.bytes for op in ops]),
                 flops=np.concatenate([op.flops for op in ops]), time_s=np.concatenate([op.time_s for op in ops]),
                 source=sources[0] if len(sources) == 1 else "; ".join(sources))
    if all(op.bound_s is not None for op in ops):
        out = msgspec.structs.replace(out, bound_s=np.concatenate([op.bound_s for op in ops]))
    return out


def tree_costs_at(flat: FlatTree, steps: np.ndarray, g: GpuShape, model: ModelSpec, weight_dtype: str, tp: int,
                  params: CostParams, prefix_caching: bool = True) -> StepCosts:
    """Cost of the given decode steps (ascending, 1-based) of a run over the sharing tree."""
    parts = [_broadcast(step_costs(load, g, model, weight_dtype, tp, params, prefix_caching, grid), grid.shape, keep)
             for load, grid, keep in _chunk_loads(flat, np.asarray(steps, float))]
    return _merged(parts)


def tree_run_costs(flat: FlatTree, g: GpuShape, model: ModelSpec, weight_dtype: str, tp: int, params: CostParams,
                   prefix_caching: bool = True, budget: int = POINT_BUDGET) -> RunCosts:
    """The whole run: costs at the quadrature steps and the weights that sum them."""
    steps, weights = quadrature(flat, budget)
    costs = tree_costs_at(flat, steps, g, model, weight_dtype, tp, params, prefix_caching)
    return RunCosts(costs=costs, weights=weights, decode_steps=flat.max_output)


def tree_step_costs(flat: FlatTree, g: GpuShape, model: ModelSpec, weight_dtype: str, tp: int, params: CostParams,
                    prefix_caching: bool = True) -> StepCosts:
    """Costs at the steps a run is summed over: every decode step for runs of up to POINT_BUDGET steps."""
    return tree_run_costs(flat, g, model, weight_dtype, tp, params, prefix_caching).costs


def _stacked(loads: list[StepLoad]) -> StepLoad:
    """Loads of one shape side by side on a new leading step axis (node arrays keep their node axis first)."""
    fields = {}
    for name in StepLoad.__struct_fields__:
        vals = [np.broadcast_to(getattr(ld, name), np.broadcast_shapes(*(np.shape(getattr(x, name)) for x in loads)))
                for ld in loads]
        fields[name] = np.stack(vals, axis=1 if name.startswith("node_") else 0)
    return StepLoad(**fields)


class RunGroup(msgspec.Struct, frozen=True):
    """Runs over trees of one shape (the same nodes and output lengths; other copies), their loads stacked on a
    leading axis so that one pass of the cost model prices them all. The load does not depend on the GPU or the
    kernels: build it once, price it under any number of them (price_group)."""

    index: tuple[int, ...]           # positions of these trees in the list given to group_runs
    weights: np.ndarray              # the run sum's quadrature weights (one shape: the same for all)
    decode_steps: tuple[int, ...]
    load: StepLoad | None            # None: priced tree by tree (several chunks)
    grid: np.ndarray | None
    keep: np.ndarray | None
    flats: tuple[FlatTree, ...]


def group_runs(flats: list[FlatTree]) -> list[RunGroup]:
    by_shape: dict[tuple, list[int]] = {}
    for i, f in enumerate(flats):
        key = (f.node_tokens.size, f.n_levels, tuple(segment_ends(f).tolist()))
        by_shape.setdefault(key, []).append(i)
    out = []
    for idx in by_shape.values():
        steps, weights = quadrature(flats[idx[0]])
        chunks = [list(_chunk_loads(flats[i], steps)) for i in idx]
        one = all(len(c) == 1 for c in chunks)
        out.append(RunGroup(index=tuple(idx), weights=weights, decode_steps=tuple(flats[i].max_output for i in idx),
                            load=_stacked([c[0][0] for c in chunks]) if one else None,
                            grid=chunks[0][0][1] if one else None, keep=chunks[0][0][2] if one else None,
                            flats=tuple(flats[i] for i in idx)))
    return out


def _group_costs(group: RunGroup, g: GpuShape, model: ModelSpec, weight_dtype: str, tp: int, params: CostParams,
                 prefix_caching: bool, fields: tuple[str, ...] | None = None) -> Iterator[dict[str, Any]]:
    """Per run of the group: its cost fields (those named, else all) on the group's (segments, points) grid."""
    assert group.load is not None and group.grid is not None and group.keep is not None
    n = len(group.index)
    costs = step_costs(group.load, g, model, weight_dtype, tp, params, prefix_caching,
                       np.broadcast_to(group.grid, (n,) + group.grid.shape))
    names = fields or costs.__struct_fields__
    for j in range(n):

        def run_j(v, j=j):
            return v[j if v.shape[0] > 1 else 0] if isinstance(v, np.ndarray) and v.ndim == 3 else v

        one: dict[str, Any] = {}
        for name in names:
            v = getattr(costs, name)
            one[name] = tuple(map_arrays(op, run_j) for op in v) if name in OP_FIELDS else run_j(v)
        yield one


def price_group(group: RunGroup, g: GpuShape, model: ModelSpec, weight_dtype: str, tp: int, params: CostParams,
                prefix_caching: bool = True) -> list[RunCosts]:
    """Each run of the group, equal to its own `tree_run_costs`."""
    if group.load is None or group.grid is None or group.keep is None:
        return [tree_run_costs(f, g, model, weight_dtype, tp, params, prefix_caching) for f in group.flats]
    return [RunCosts(costs=_merged([_broadcast(StepCosts(**c), group.grid.shape, group.keep)]),
                     weights=group.weights, decode_steps=steps)
            for c, steps in zip(_group_costs(group, g, model, weight_dtype, tp, params, prefix_caching),
                                group.decode_steps)]


def group_step_times(group: RunGroup, g: GpuShape, model: ModelSpec, weight_dtype: str, tp: int, params: CostParams,
                     prefix_caching: bool = True) -> list[tuple[np.ndarray, np.ndarray]]:
    """Each run's (per-sequence, cascade) step times at the steps its weights sum: `price_group`'s ps_step_s and
    cas_step_s without broadcasting every other field (what a search over many configurations needs)."""
    if group.load is None or group.grid is None or group.keep is None:
        return [(r.costs.ps_step_s, r.costs.cas_step_s)
                for r in price_group(group, g, model, weight_dtype, tp, params, prefix_caching)]
    shape, keep = group.grid.shape, group.keep
    out = []
    for c in _group_costs(group, g, model, weight_dtype, tp, params, prefix_caching, ("ps_step_s", "cas_step_s")):
        ps, cas = (np.broadcast_to(np.asarray(c[f], float), shape)[keep] for f in ("ps_step_s", "cas_step_s"))
        out.append((ps, cas))
    return out


def tree_run_costs_many(flats: list[FlatTree], g: GpuShape, model: ModelSpec, weight_dtype: str, tp: int,
                        params: CostParams, prefix_caching: bool = True) -> list[RunCosts]:
    """`tree_run_costs` of each tree, trees of one shape priced in one pass of the cost model."""
    out: list[RunCosts | None] = [None] * len(flats)
    for group in group_runs(flats):
        for i, r in zip(group.index, price_group(group, g, model, weight_dtype, tp, params, prefix_caching)):
            out[i] = r
    return [r for r in out if r is not None]
