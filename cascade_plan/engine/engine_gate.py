"""Would the engine turn cascade on for this workload? vLLM V1's gate (vllm_gate.py) applied to a
workload, as shipped (cascade disabled by default) and opted in (--no-disable-cascade-attn)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from cascade_plan.cost.cost_model import gpu_shape, kv_heads_per_gpu, q_heads_per_gpu
from cascade_plan.cost.cost_params import IDEAL
from cascade_plan.cost.estimate import Estimate
from cascade_plan.cost.flat_tree import FlatTree
from cascade_plan.cost.run_load import tree_run_costs
from cascade_plan.engine.vllm_gate import FLASHINFER_NEVER_USES_CASCADE, VllmGateDecision, VllmGateInputs, vllm_uses_cascade
from cascade_plan.inputs.workload import TreeNode

# The model "picks" cascade when it is at least this much faster over the run; below it the two
# are a wash within the model's own error.
PAYS_THRESHOLD = 1.05


def common_prefix_of_all(tree: TreeNode) -> int:
    """Tokens shared by every sequence of the batch: the chain of single-instance nodes from the root.
    vLLM only cascades over this (blocks whose reference count equals the number of requests)."""
    tokens, node = 0, tree
    while node.copies == 1:
        tokens += node.tokens
        if len(node.children) != 1:
            break
        node = node.children[0]
    return tokens


@dataclass(frozen=True)
class EngineView:
    common_prefix_tokens: int
    requests: int
    shipped: VllmGateDecision          # vLLM as shipped: disable_cascade_attn=True
    opted_in: VllmGateDecision         # with --no-disable-cascade-attn
    model_speedup: float               # the planner's run speedup, every shared level cascaded
    # Bytes only (ideal mode), so that the two sharing structures compare on equal terms whatever kernels
    # are calibrated (vLLM runs FlashAttention's kernels, not the calibrated backend's):
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
                text += (f" But vLLM cascades only the {self.common_prefix_tokens}-token prefix every request shares: "
                         f"by bytes alone that is worth {self.engine_speedup:.2f}x over the run, against "
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
    return replace(
        flat, leaf_private=flat.leaf_private + flat.leaf_shared - common_tokens,
        leaf_shared=np.full_like(flat.leaf_shared, common_tokens),
        node_tokens=np.full(nodes, float(common_tokens)), node_instances=np.ones(nodes),
        node_level=np.zeros(nodes, dtype=np.int64),
        pair_node=np.zeros(seqs.size * nodes, dtype=np.int64), pair_leaf=np.arange(seqs.size * nodes),
        pair_seqs=seqs.copy() if nodes else np.zeros(0),
    )


def engine_view(est: Estimate) -> EngineView:
    scn, flat = est.scenario, est.flat
    m = scn.model
    prefix = common_prefix_of_all(scn.tree)
    inputs = VllmGateInputs(
        common_prefix_tokens=prefix, num_requests=flat.total_seqs,
        num_query_heads=q_heads_per_gpu(m, scn.tp), num_kv_heads=kv_heads_per_gpu(m, scn.tp),
        num_sms=scn.hardware.sm_count, block_size=scn.block_size, use_alibi=m.alibi,
        sliding_window=m.sliding_window, prefix_caching_enabled=scn.prefix_caching,
    )
    note = FLASHINFER_NEVER_USES_CASCADE
    if m.attention == "mla":
        note = ("MLA models run on vLLM's MLA backends, which have no cascade path; the FlashAttention gate "
                "below is shown for reference only. " + note)
    opted_in = vllm_uses_cascade(replace(inputs, disable_cascade_attn=False))
    g = gpu_shape(m, scn.hardware, scn.kv_dtype, scn.weight_dtype, scn.tp)

    def ideal(f: FlatTree) -> tuple[float, float]:
        run = tree_run_costs(f, g, m, scn.weight_dtype, scn.tp, IDEAL, scn.prefix_caching)
        return run.run_total(run.costs.ps_step_s), run.run_total(run.costs.cas_step_s)

    per_seq, multi_level = ideal(flat)
    engine_speedup = per_seq / ideal(common_only(flat, prefix))[1] if opted_in.used else 1.0
    return EngineView(common_prefix_tokens=prefix, requests=flat.total_seqs, shipped=vllm_uses_cascade(inputs),
                      opted_in=opted_in, model_speedup=est.run_speedup, engine_speedup=engine_speedup,
                      multi_level_speedup=per_seq / multi_level, note=note)
