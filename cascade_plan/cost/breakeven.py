"""Where cascade starts to pay: vectorised sweeps over prefix length x group size x suffix length,
and exact breakevens found by bisection (all points at once)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cascade_plan.cost.cost_model import gpu_shape, single_level_load, step_costs
from cascade_plan.cost.capacity import DEFAULT_RESERVE_FRACTION
from cascade_plan.cost.cost_params import CostParams
from cascade_plan.cost.memory_fit import single_level_fits
from cascade_plan.inputs.workload import Scenario


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
    """Smallest integer x in (lo, hi] with pred(x) true, for a predicate false at lo and monotone
    beyond; hi + 1 where pred(hi) is false. Bisection, vectorised over the shape of lo/hi."""
    lo, hi = lo.astype(np.int64).copy(), hi.astype(np.int64).copy()
    ok_hi = pred(hi)
    for _ in range(64):
        if np.all(hi - lo <= 1):
            break
        mid = (lo + hi) // 2
        ok = pred(mid)
        hi = np.where(ok, mid, hi)
        lo = np.where(ok, lo, mid)
    return np.where(ok_hi, hi, hi + 1)


def _breakeven(scn: Scenario, params: CostParams, axis: str, fixed, suffix_tokens, n_groups: int, lo: int,
               hi: int) -> np.ndarray:
    """[fixed, suffix]: the smallest value of `axis` ("prefix" or "group") in (lo, hi] at which cascade
    beats per-sequence attention, the other axis held at each of `fixed`; -1 where none up to hi."""
    other = np.asarray(fixed, dtype=float)[:, None]
    s = np.asarray(suffix_tokens, dtype=float)[None, :]
    other, s = np.broadcast_arrays(other, s)

    def wins(x):
        p, n = (x, other) if axis == "prefix" else (other, x)
        c = _costs(scn, params, p, n, n_groups, s)
        return c.cas_step_s < c.ps_step_s

    found = _first_true(wins, np.full(other.shape, lo), np.full(other.shape, hi))
    return np.where(found > hi, -1, found)


def breakeven_prefix_tokens(scn: Scenario, params: CostParams, group_size, suffix_tokens, n_groups: int = 1,
                            max_prefix: int = 1 << 20) -> np.ndarray:
    """[n, s]: the shortest shared prefix at which cascade is faster than per-sequence attention;
    -1 where it never is up to max_prefix (a group of one, or overheads that the savings never repay)."""
    return _breakeven(scn, params, "prefix", group_size, suffix_tokens, n_groups, 0, max_prefix)


def breakeven_group_size(scn: Scenario, params: CostParams, prefix_tokens, suffix_tokens, n_groups: int = 1,
                         max_group: int = 1 << 14) -> np.ndarray:
    """[p, s]: the smallest group (sequences sharing one prefix) at which cascade is faster; -1 if none
    up to max_group."""
    return _breakeven(scn, params, "group", prefix_tokens, suffix_tokens, n_groups, 1, max_group)
