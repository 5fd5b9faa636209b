"""Minimal HBM bytes and FLOPs for each timed kernel (pure Python). See docs/probe.md.

Conventions (one attention layer, all of its KV heads):
* a KV token costs ``2 * num_kv_heads * head_dim * kv_elem_bytes`` bytes (K and V);
* q is read once and the output written once in bf16 (2 bytes), ``B * Hq * head_dim`` elements each;
* a float32 attention state is ``head_dim + 1`` floats per (sequence, query head) row;
* decode_* bytes count every sequence reading its whole context (prefix + suffix): the per-sequence
  floor without any cache reuse; ``unique_bytes`` counts each distinct byte once (prefix once per group),
  so bytes / time is the *effective* bandwidth and unique_bytes / time the physical one;
* a three-level tree's root (root_tokens) is one more shared level: read once, a state per row of its own;
* cascade_prefix: prefix KV once per group (and the root once) + q + one state per row and level written;
  cascade_suffix: suffix KV + q + one state per row; cascade_merge: one state per level and one for the
  suffix read per row + bf16 out;
  cascade_total: the fused floor: prefix KV once per group + suffix KV + q + out.
* FLOPs: QK^T and PV, 2 FLOP per multiply-add, every query head: ``4 * B * Hq * head_dim * tokens``;
  the merge is counted as 3 FLOP per output element per state.
"""

from __future__ import annotations

from kernels_probe.attention.grid import AttentionConfig


def kv_bytes_per_token(c: AttentionConfig) -> int:
    return 2 * c.num_kv_heads * c.head_dim * c.kv_elem_bytes


def _q_bytes(c: AttentionConfig) -> int:
    """One bf16 [B, Hq, head_dim] tensor (q, or the output)."""
    return c.batch * c.num_q_heads * c.head_dim * 2


def _state_bytes(c: AttentionConfig) -> int:
    return c.batch * c.num_q_heads * (c.head_dim + 1) * 4


def attn_flops(c: AttentionConfig, tokens_per_seq: int) -> int:
    return 4 * c.batch * c.num_q_heads * c.head_dim * tokens_per_seq


def kernel_cost(c: AttentionConfig, kernel: str) -> dict:
    """{'bytes', 'unique_bytes', 'flops'} for one timed kernel of configuration c."""
    kvt = kv_bytes_per_token(c)
    qb = _q_bytes(c)
    P, S, B = c.prefix_tokens, c.suffix_tokens, c.batch
    levels = 2 if c.root_tokens else 1     # shared levels: the root (trees only), the group prefix
    P_all = c.root_tokens + P
    prefix_once = (c.root_tokens + c.n_groups * P) * kvt
    suffix = B * S * kvt
    if kernel in ("decode_shared", "decode_dup"):
        b = B * (P_all + S) * kvt + 2 * qb
        u = (prefix_once + suffix + 2 * qb) if kernel == "decode_shared" else b
        return {"bytes": b, "unique_bytes": u, "flops": attn_flops(c, P_all + S)}
    if kernel == "cascade_prefix":
        b = prefix_once + qb + levels * _state_bytes(c)
        return {"bytes": b, "unique_bytes": b, "flops": attn_flops(c, P_all)}
    if kernel == "cascade_suffix":
        b = suffix + qb + _state_bytes(c)
        return {"bytes": b, "unique_bytes": b, "flops": attn_flops(c, S)}
    if kernel == "cascade_merge":
        b = (levels + 1) * _state_bytes(c) + qb
        return {"bytes": b, "unique_bytes": b, "flops": 3 * (levels + 1) * B * c.num_q_heads * c.head_dim}
    if kernel == "cascade_total":
        b = prefix_once + suffix + 2 * qb
        return {"bytes": b, "unique_bytes": b, "flops": attn_flops(c, P_all + S)}
    raise ValueError(f"unknown kernel {kernel!r}")
