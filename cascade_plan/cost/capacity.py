"""KV capacity: how many sequences of this workload fit in GPU memory after the weights, with the
prefix stored once (storage sharing) and without; and whether one sibling group fits at all."""

from __future__ import annotations

import msgspec
import numpy as np

from cascade_plan.cost.cost_model import kv_bytes_per_token
from cascade_plan.cost.flat_tree import FlatTree, flatten
from cascade_plan.inputs.dtypes import ELEMENT_BYTES
from cascade_plan.inputs.workload import Scenario
from cascade_plan.units import fmt_bytes_binary

# vLLM's default gpu_memory_utilization is 0.9: the last 10% is left for activations, CUDA graphs
# and the allocator. Users change it with --reserve.
DEFAULT_RESERVE_FRACTION = 0.10


class Capacity(msgspec.Struct, frozen=True):
    memory_bytes: float
    weight_bytes: float                # every parameter stored on this GPU (all experts)
    reserve_bytes: float
    kv_budget_bytes: float
    sequences: int                     # in the workload's batch
    kv_bytes_shared: float             # the whole batch at its longest, each shared node stored once
    kv_bytes_unshared: float           # every sequence holding its own copy of its prefix
    max_sequences_shared: int          # at the workload's sharing ratio
    max_sequences_unshared: int
    group_sequences: int               # the largest sibling group (one leaf instance)
    group_kv_bytes: float              # that group with its whole prefix chain, at the end of the run

    @property
    def fits_shared(self) -> bool:
        return self.kv_bytes_shared <= self.kv_budget_bytes

    @property
    def fits_unshared(self) -> bool:
        return self.kv_bytes_unshared <= self.kv_budget_bytes

    @property
    def group_fits(self) -> bool:
        return self.group_kv_bytes <= self.kv_budget_bytes


def stored_weight_bytes(scn: Scenario) -> float:
    """Every parameter this GPU stores (all experts), after tensor parallelism."""
    return scn.model.total_params * ELEMENT_BYTES[scn.weight_dtype] / scn.tp


def kv_budget_bytes(scn: Scenario, reserve_fraction: float = DEFAULT_RESERVE_FRACTION) -> float:
    """GPU memory left for KV after the weights and the reserve (0 when the weights do not fit)."""
    mem = scn.hardware.memory_bytes
    return max(0.0, mem - stored_weight_bytes(scn) - reserve_fraction * mem)


def capacity(scn: Scenario, reserve_fraction: float = DEFAULT_RESERVE_FRACTION,
             flat: FlatTree | None = None) -> Capacity:
    flat = flat or flatten(scn.tree)
    kvb = kv_bytes_per_token(scn.model, scn.kv_dtype, scn.tp)
    mem = scn.hardware.memory_bytes
    weights = stored_weight_bytes(scn)
    reserve = reserve_fraction * mem
    budget = kv_budget_bytes(scn, reserve_fraction)
    own = flat.leaf_private + flat.leaf_output                  # per sequence, at the end of its run
    shared = (flat.unique_prefix_tokens + (flat.leaf_seqs * own).sum()) * kvb
    unshared = (flat.leaf_seqs * (flat.leaf_shared + own)).sum() * kvb
    n = flat.total_seqs
    samples = flat.leaf_seqs // flat.leaf_instances
    group_bytes = (flat.leaf_shared + samples * own) * kvb
    g = int(np.argmax(group_bytes))
    return Capacity(
        memory_bytes=mem, weight_bytes=weights, reserve_bytes=reserve, kv_budget_bytes=budget, sequences=n,
        kv_bytes_shared=float(shared), kv_bytes_unshared=float(unshared),
        max_sequences_shared=int(budget // (shared / n)), max_sequences_unshared=int(budget // (unshared / n)),
        group_sequences=int(samples[g]), group_kv_bytes=float(group_bytes[g]),
    )


def preemption_warnings(cap: Capacity, prefix_caching: bool) -> list[str]:
    out = []
    if not cap.group_fits:
        out.append(f"one sibling group ({cap.group_sequences} sequences, {fmt_bytes_binary(cap.group_kv_bytes)} of KV "
                   f"by the end of the run) does not fit in the {fmt_bytes_binary(cap.kv_budget_bytes)} left for KV: "
                   "the engine will preempt siblings and the batch silently loses its common prefix. "
                   "Use more GPUs (TP), a smaller KV dtype, or fewer samples per prompt.")
    elif not (cap.fits_shared if prefix_caching else cap.fits_unshared):
        need = cap.kv_bytes_shared if prefix_caching else cap.kv_bytes_unshared
        out.append(f"the whole batch needs {fmt_bytes_binary(need)} of KV but {fmt_bytes_binary(cap.kv_budget_bytes)} "
                   f"is free: about {cap.max_sequences_shared if prefix_caching else cap.max_sequences_unshared} of "
                   f"{cap.sequences} sequences run at once; keep whole sibling groups together so none loses its "
                   "prefix.")
    return out
