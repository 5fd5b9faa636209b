"""Would the engine turn cascade on for this workload? vLLM V1 applied to a workload's first decode
step (vllm_step.py), on the attention backend vLLM runs on that GPU (attention_backend.py) or the
one the user chose, as shipped (cascade disabled by default) and opted in (--no-disable-cascade-attn)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import msgspec
import numpy as np

from cascade_plan.cost.cost_model import gpu_shape, kv_heads_per_gpu, q_heads_per_gpu
from cascade_plan.cost.cost_params import IDEAL
from cascade_plan.cost.estimate import Estimate
from cascade_plan.cost.flat_tree import FlatTree
from cascade_plan.cost.run_load import tree_run_costs
from cascade_plan.engine.attention_backend import BackendChoice, attention_backend
from cascade_plan.engine.vllm_gate import VllmGateDecision
from cascade_plan.engine.vllm_source import FLASHINFER_NEVER_USES_CASCADE
from cascade_plan.engine.vllm_step import (
    KvCacheGroup,
    VllmStepCounts,
    VllmStepDecision,
    vllm_step_decision,
)
from cascade_plan.inputs.workload import TreeNode

# The model "picks" cascade when it is at least this much faster over the run; below it the two
# are a wash within the model's own error.
PAYS_THRESHOLD = 1.05


def common_prefix_of_all(tree: TreeNode) -> int:
    """Tokens shared by every sequence of the batch: the chain of single-instance nodes from the root.
    vLLM only cascades over this (blocks whose reference count equals the number of requests holding
    KV blocks; in a workload every sequence holds its blocks until it finishes)."""
    tokens, node = 0, tree
    while node.copies == 1:
        tokens += node.tokens
        if len(node.children) != 1:
            break
        node = node.children[0]
    return tokens


def kv_cache_groups(m, prefix_tokens: int, block_size: int, prefix_caching: bool) -> tuple[KvCacheGroup, ...]:
    """The model's KV-cache groups as vLLM forms them, with the scheduler's common-block count for each:
    full-attention layers in one group, sliding-window layers in another (which reports 0 blocks)."""
    blocks = prefix_tokens // block_size if prefix_caching else 0
    window = m.sliding_window
    sliding = int(getattr(m, "num_sliding_window_layers", m.num_layers if window else 0) or 0)
    groups = []
    if m.num_layers - sliding > 0:
        groups.append(KvCacheGroup(blocks, m.num_layers - sliding, "full", block_size))
    if sliding > 0:
        groups.append(KvCacheGroup(0, sliding, "sliding_window", block_size, sliding_window=window))
    return tuple(groups)


@dataclass(frozen=True)
class EngineView:
    common_prefix_tokens: int
    requests: int
    backend: BackendChoice             # the attention backend vLLM runs (its default on the GPU, or the user's)
    shipped: VllmGateDecision          # vLLM as shipped: disable_cascade_attn=True
    opted_in: VllmGateDecision         # with --no-disable-cascade-attn, on `backend`
    step: VllmStepDecision             # the whole first step, opted in: per KV-cache group, CUDA graph
    model_speedup: float               # the planner's run speedup, every shared level cascaded
    # Bytes only (ideal mode), so that the two sharing structures compare on equal terms whatever kernels
    # are calibrated (vLLM runs FlashAttention's kernels, not the calibrated backend's); the engine's
    # figure also pays the lost full CUDA graph on every cascaded step:
    engine_speedup: float              # what vLLM (opted in) would run: one level over the all-shared prefix, or 1.0
    multi_level_speedup: float         # every shared level cascaded
    note: str

    @property
    def model_pays(self) -> bool:
        return self.model_speedup >= PAYS_THRESHOLD

    @property
    def agrees(self) -> bool:
        return self.opted_in.used == self.model_pays

    @property
    def finding(self) -> str:
        if self.agrees:
            verb = "would use" if self.model_pays else "would not use"
            text = f"vLLM (opted in) {verb} cascade, and the model agrees ({self.model_speedup:.2f}x over the run)."
            if self.opted_in.used and self.engine_speedup < self.multi_level_speedup * 0.95:
                text += (f" But vLLM cascades only the {self.common_prefix_tokens:,}-token prefix every request "
                         f"shares: by bytes alone that is worth {self.engine_speedup:.2f}x over the run, against "
                         f"{self.multi_level_speedup:.2f}x for a cascade over every shared level (FlashInfer's "
                         "MultiLevelCascadeAttentionWrapper).")
            return text
        if self.model_pays:
            return (f"Disagreement: the model says cascade pays {self.model_speedup:.2f}x over the run, but vLLM "
                    f"would not use it even when opted in: {self.opted_in.reason}")
        return (f"Disagreement: vLLM (opted in) would use cascade, but the model says it does not pay "
                f"({self.model_speedup:.2f}x over the run).")


def common_only(flat: FlatTree, common_tokens: int) -> FlatTree:
    """The same batch with only the all-shared prefix cascaded (one level); every other shared
    token becomes private to each sequence, as in vLLM's single-level cascade."""
    seqs = flat.leaf_seqs
    nodes = int(common_tokens > 0)
    return msgspec.structs.replace(
        flat, leaf_private=flat.leaf_private + flat.leaf_shared - common_tokens,
        leaf_shared=np.full_like(flat.leaf_shared, common_tokens),
        node_tokens=np.full(nodes, float(common_tokens)), node_instances=np.ones(nodes),
        node_level=np.zeros(nodes, dtype=np.int64),
        pair_node=np.zeros(seqs.size * nodes, dtype=np.int64), pair_leaf=np.arange(seqs.size * nodes),
        pair_seqs=seqs.copy() if nodes else np.zeros(0),
    )


def _first_group(step: VllmStepDecision) -> VllmGateDecision:
    """The decision to quote for the step: the cascading group, else the full-attention one, else the first."""
    for g in step.groups:
        if g.cascade_prefix_tokens > 0:
            return g.decision
    return next((g.decision for g in step.groups if g.group.kind == "full"), step.groups[0].decision)


def engine_view(est: Estimate, attention_backend_name: str | None = None) -> EngineView:
    """vLLM's choice for the workload; `attention_backend_name` is the user's --attention-backend
    (validated by attention_backend.parse_attention_backend), None for vLLM's default on the GPU."""
    scn, flat = est.scenario, est.flat
    m = scn.model
    prefix = common_prefix_of_all(scn.tree)
    backend = attention_backend(scn.hardware, m.attention == "mla", attention_backend_name)
    counts = VllmStepCounts(
        num_requests=flat.total_seqs, groups=kv_cache_groups(m, prefix, scn.block_size, scn.prefix_caching),
        num_query_heads=q_heads_per_gpu(m, scn.tp), num_kv_heads=kv_heads_per_gpu(m, scn.tp),
        num_sms=scn.hardware.sm_count, use_alibi=m.alibi, attention_backend=backend.name)
    step = vllm_step_decision(counts)
    shipped = _first_group(vllm_step_decision(replace(counts, disable_cascade_attn=True)))
    opted_in = _first_group(step)
    g = gpu_shape(m, scn.hardware, scn.kv_dtype, scn.weight_dtype, scn.tp)

    def ideal(f: FlatTree) -> tuple[float, float]:
        run = tree_run_costs(f, g, m, scn.weight_dtype, scn.tp, IDEAL, scn.prefix_caching)
        return run.run_total(run.costs.ps_step_s), run.run_total(run.costs.cas_step_s)

    per_seq, multi_level = ideal(flat)
    engine_speedup = 1.0
    if step.used:
        engine_speedup = per_seq / (ideal(common_only(flat, prefix))[1] + est.decode_steps * step.added_s)
    return EngineView(common_prefix_tokens=prefix, requests=flat.total_seqs, backend=backend, shipped=shipped,
                      opted_in=opted_in, step=step, model_speedup=est.run_speedup, engine_speedup=engine_speedup,
                      multi_level_speedup=per_seq / multi_level,
                      note=FLASHINFER_NEVER_USES_CASCADE)
