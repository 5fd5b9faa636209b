"""The per-GPU shape of a decode step and the load it puts on the attention kernels: what every op of the step
(cost/ops/) reads, below the step itself (cost/cost_model.py). Pure numpy."""

from __future__ import annotations

import msgspec
import numpy as np

from cascade_plan.cost.moe_routing import expected_experts_touched
from cascade_plan.cost.ops.attention_work import kv_token_bytes, merge_state_bytes, query_token_flops
from cascade_plan.inputs.dtypes import ELEMENT_BYTES, kv_row_bytes
from cascade_plan.inputs.hardware import HardwareProfile
from cascade_plan.inputs.model_spec import ModelSpec


def kv_heads_per_gpu(model: ModelSpec, tp: int) -> int:
    """KV heads each rank stores: split across ranks, replicated when there are fewer heads than
    ranks (MLA's single latent is replicated on every rank)."""
    return max(1, -(-model.num_kv_heads // tp))


def q_heads_per_gpu(model: ModelSpec, tp: int) -> int:
    return model.num_q_heads // tp


def kv_bytes_per_token(model: ModelSpec, kv_dtype: str, tp: int = 1) -> float:
    """Bytes of KV cache one token occupies on one GPU, all layers.
    GQA: 2 (K and V) x L x Hkv x d x b. MLA: L x (kv_lora_rank + rope_dim) x b, no factor 2."""
    if model.attention == "mla":
        return model.num_layers * kv_row_bytes(kv_dtype, model.kv_lora_rank + model.qk_rope_head_dim)
    return kv_token_bytes(kv_heads_per_gpu(model, tp), kv_row_bytes(kv_dtype, model.head_dim), model.num_layers)


def weight_params_read(model: ModelSpec, batch: np.ndarray | float) -> np.ndarray:
    """Parameters read per decode step: every non-expert parameter (the seed's convention: the whole
    model once per step, embeddings included) plus the routed experts the batch touches."""
    experts = expected_experts_touched(model, batch) * model.expert_params_per_layer * model.num_moe_layers
    return model.always_read_params + experts


def weight_bytes_per_gpu(model: ModelSpec, weight_dtype: str, tp: int, batch: np.ndarray | float = 1) -> np.ndarray:
    return weight_params_read(model, batch) * ELEMENT_BYTES[weight_dtype] / tp


def gemm_flops_per_gpu(model: ModelSpec, tp: int, batch: np.ndarray | float) -> np.ndarray:
    """2 FLOP per multiply-add over the parameters each token uses; the input embedding is a lookup."""
    return 2.0 * (model.active_params - model.embedding_params) * np.asarray(batch, dtype=float) / tp


class GpuShape(msgspec.Struct, frozen=True):
    """The per-GPU constants a decode step needs."""

    layers: int
    q_heads: int
    kv_heads: int                        # per GPU; 1 for MLA (rows of work per sequence per layer)
    kv_bytes_per_token: float
    attn_flop_per_query_token: float     # FLOP for one query sequence against one cached token, all layers
    merge_bytes_per_seq_level: float     # read two (output, LSE) states and write one, all layers
    hbm_bytes_per_s: float
    attn_flop_per_s: float
    gemm_flop_per_s: float
    l2_bytes: float


def gpu_shape(model: ModelSpec, hw: HardwareProfile, kv_dtype: str, weight_dtype: str, tp: int) -> GpuShape:
    hq = q_heads_per_gpu(model, tp)
    return GpuShape(
        layers=model.num_layers,
        q_heads=hq,
        kv_heads=kv_heads_per_gpu(model, tp),
        kv_bytes_per_token=kv_bytes_per_token(model, kv_dtype, tp),
        attn_flop_per_query_token=query_token_flops(hq, model.attn_qk_dim, model.attn_v_dim, model.num_layers),
        merge_bytes_per_seq_level=merge_state_bytes(hq, model.attn_v_dim, model.num_layers),
        hbm_bytes_per_s=hw.hbm_bytes_per_s,
        attn_flop_per_s=hw.dense_bf16_flop_per_s,
        gemm_flop_per_s=hw.flop_per_s(weight_dtype),
        l2_bytes=hw.l2_bytes,
    )


class StepLoad(msgspec.Struct, frozen=True):
    """What one decode step asks of the attention kernels, in tokens. Arrays broadcast over any
    trailing shape S (decode steps of a run, or a sweep grid); node arrays are (J,) + S."""

    active_seqs: np.ndarray
    ps_prefix_tokens: np.ndarray      # shared tokens the per-sequence kernel reads, summed over sequences
    suffix_tokens: np.ndarray         # private tokens (own prompt + generated), summed over sequences
    node_tokens: np.ndarray           # (J,)+S: tokens of every shared node read once (0 when nobody reads it)
    node_query_tokens: np.ndarray     # (J,)+S: node tokens x sequences reading them (prefix-pass FLOPs)
    node_redundant_tokens: np.ndarray  # (J,)+S: re-reads a per-sequence kernel makes of shared tokens
    levels_on: np.ndarray             # cascade levels launched
    node_instance_tokens: np.ndarray  # (J,)+S: tokens of one instance of each node
    longest_context: np.ndarray       # tokens of the longest sequence decoding (per-sequence kernel's longest row)
    longest_suffix: np.ndarray        # private tokens of the longest suffix (suffix pass's longest row)


def single_level_load(prefix_tokens, group_size, n_groups, suffix_tokens) -> StepLoad:
    """`n_groups` prompts of `prefix_tokens`, each shared by `group_size` sequences that read
    `suffix_tokens` private tokens this step. Any argument may be an array (a sweep grid)."""
    p, n, gr, sfx = (np.asarray(x, dtype=float) for x in (prefix_tokens, group_size, n_groups, suffix_tokens))
    seqs = n * gr
    on = (p > 0) & (n > 0)
    return StepLoad(
        active_seqs=seqs, ps_prefix_tokens=seqs * p, suffix_tokens=seqs * sfx,
        node_tokens=(gr * p * on)[None], node_query_tokens=(gr * p * n)[None],
        node_redundant_tokens=(gr * p * np.maximum(n - 1, 0))[None], levels_on=on.astype(float),
        node_instance_tokens=(p * on)[None], longest_context=p + sfx, longest_suffix=sfx,
    )
