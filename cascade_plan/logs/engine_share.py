"""Would vLLM have cascaded the logged steps? Its gate (engine/vllm_gate.py) only sees the prefix
shared by EVERY running request; per step that is the chain of levels, from the outermost, that
hold a single node read by all sequences."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from cascade_plan.cost.cost_model import kv_heads_per_gpu, q_heads_per_gpu
from cascade_plan.engine.vllm_gate import FLASHINFER_NEVER_USES_CASCADE, VllmGateInputs, vllm_uses_cascade
from cascade_plan.logs.duck_reader import LogTables

if TYPE_CHECKING:  # pragma: no cover
    from cascade_plan.inputs.workload import Scenario


def common_prefix_per_step(t: LogTables) -> np.ndarray:
    """(S,) tokens shared by every sequence of each step."""
    S = t.steps
    if t.node_step.size == 0:
        return np.zeros(S)
    levels = int(t.node_level.max())
    all_read = (t.node_instances == 1) & (t.node_readers == t.seqs[t.node_step])
    ok = np.zeros((levels + 1, S), bool)
    tok = np.zeros((levels + 1, S))
    ok[t.node_level[all_read], t.node_step[all_read]] = True
    tok[t.node_level[all_read], t.node_step[all_read]] = t.node_tokens[all_read]
    chain = np.cumprod(ok[1:], axis=0).astype(bool)          # level 1..L, unbroken from the outermost
    return (tok[1:] * chain).sum(0)


@dataclass(frozen=True)
class EngineShare:
    common_prefix_tokens: np.ndarray      # (S,)
    vllm_would_cascade: np.ndarray        # (S,) bool: vLLM V1, FlashAttention backend, opted in

    def to_json(self, pays: np.ndarray) -> dict:
        v = self.vllm_would_cascade
        n = max(v.size, 1)
        return {"share_of_steps_vllm_would_cascade": float(v.sum() / n),
                "share_of_steps_model_pays_vllm_does_not": float((pays & ~v).sum() / n),
                "share_of_steps_vllm_cascades_model_says_slower": float((v & ~pays).sum() / n),
                "note": "vLLM V1 FlashAttention backend with --no-disable-cascade-attn (recent releases ship it "
                        "disabled); " + FLASHINFER_NEVER_USES_CASCADE}


def engine_share(t: LogTables, scn: Scenario) -> EngineShare:
    common = common_prefix_per_step(t)
    m = scn.model
    pairs, inverse = np.unique(np.stack([common, t.seqs]).astype(np.int64), axis=1, return_inverse=True)
    used = np.zeros(pairs.shape[1], bool)
    for i, (prefix, n) in enumerate(pairs.T):
        if n < 1:
            continue
        used[i] = vllm_uses_cascade(VllmGateInputs(
            common_prefix_tokens=int(prefix), num_requests=int(n), num_query_heads=q_heads_per_gpu(m, scn.tp),
            num_kv_heads=kv_heads_per_gpu(m, scn.tp), num_sms=scn.hardware.sm_count, block_size=scn.block_size,
            use_alibi=m.alibi, sliding_window=m.sliding_window, prefix_caching_enabled=scn.prefix_caching,
            disable_cascade_attn=False)).used
    return EngineShare(common_prefix_tokens=common, vllm_would_cascade=used[inverse.reshape(-1)])
