"""Price every logged decode step with the cost model `estimate` uses (cost_model.step_costs), in
both modes. The node buckets of a step (one per level and node length) play the role of the
sharing tree's nodes, so a log simulated from a workload costs exactly what `estimate` says."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from cascade_plan.cost.cost_model import StepLoad, gpu_shape, step_costs
from cascade_plan.cost.cost_params import CostParams
from cascade_plan.logs.duck_reader import LogTables

if TYPE_CHECKING:  # pragma: no cover
    from cascade_plan.inputs.workload import Scenario

# Node buckets x steps priced at once: bounds the (J, S) arrays to a few tens of MB.
CHUNK_CELLS = 1 << 20


@dataclass(frozen=True)
class StepTimes:
    per_sequence_s: np.ndarray    # (S,) decode step time with per-sequence attention
    cascade_s: np.ndarray         # (S,) with cascade attention
    weight_s: np.ndarray          # (S,) the weights' part (the same in both modes)

    @property
    def pays(self) -> np.ndarray:
        return self.cascade_s < self.per_sequence_s


def _chunk_load(t: LogTables, lo: int, hi: int, n0: int, n1: int) -> StepLoad:
    s = slice(lo, hi)
    step = t.node_step[n0:n1] - lo
    # bucket index within its step: buckets come sorted by (step, level, tokens)
    first = np.r_[0, np.flatnonzero(np.diff(step)) + 1] if step.size else np.zeros(0, np.int64)
    j = np.arange(step.size) - np.repeat(first, np.diff(np.r_[first, step.size])) if step.size else step
    J = int(j.max()) + 1 if j.size else 1
    shape = (J, hi - lo)

    def grid(values: np.ndarray) -> np.ndarray:
        out = np.zeros(shape)
        out[j, step] = values
        return out

    tok, inst, rd, lvl = (t.node_tokens[n0:n1], t.node_instances[n0:n1], t.node_readers[n0:n1], t.node_level[n0:n1])
    levels_on = np.zeros(hi - lo)
    if step.size:
        pairs = np.unique(np.stack([step, lvl]), axis=1)
        np.add.at(levels_on, pairs[0], 1.0)
    return StepLoad(
        active_seqs=t.seqs[s], ps_prefix_tokens=t.ps_prefix_tokens[s], suffix_tokens=t.suffix_tokens[s],
        node_tokens=grid(tok * inst), node_query_tokens=grid(tok * rd), node_redundant_tokens=grid(tok * (rd - inst)),
        levels_on=levels_on, node_instance_tokens=grid(tok), longest_context=t.longest_context[s],
        longest_suffix=t.longest_suffix[s])


def price_steps(t: LogTables, scn: Scenario, params: CostParams) -> StepTimes:
    """Per-sequence and cascade step time of every logged step (scn: model, hardware, dtypes, TP)."""
    g = gpu_shape(scn.model, scn.hardware, scn.kv_dtype, scn.weight_dtype, scn.tp)
    S = t.steps
    ps, cas, w = np.zeros(S), np.zeros(S), np.zeros(S)
    per_step = np.bincount(t.node_step, minlength=S) if S else np.zeros(0, np.int64)
    bounds = np.r_[0, np.cumsum(per_step)]
    width = max(1, int(per_step.max()) if per_step.size else 1)
    chunk = max(1, CHUNK_CELLS // width)
    for lo in range(0, S, chunk):
        hi = min(S, lo + chunk)
        load = _chunk_load(t, lo, hi, int(bounds[lo]), int(bounds[hi]))
        c = step_costs(load, g, scn.model, scn.weight_dtype, scn.tp, params, scn.prefix_caching)
        ps[lo:hi], cas[lo:hi], w[lo:hi] = c.ps_step_s, c.cas_step_s, c.weight_s
    return StepTimes(per_sequence_s=ps, cascade_s=cas, weight_s=w)
