"""Minimal HBM bytes and FLOPs for each timed kernel (pure Python). See docs/probe.md.

Conventions (one attention layer, all of its KV heads):
* a KV token costs ``2 * num_kv_heads * head_dim * kv_elem_bytes`` bytes (K and V);
* q is read once and the output written once in bf16 (2 bytes), ``B * Hq * head_dim`` elements each;
* a float32 attention state is ``head_dim + 1`` floats per (sequence, query head) row;
* decode_* bytes count every sequence reading its whole context (prefix + suffix): the per-sequence
  floor without any cache reuse; ``unique_bytes`` counts each distinct byte once (prefix once per group),
  so bytes / time is the *effective* bandwidth and unique_bytes / time the physical one;
* cascade_prefix: prefix KV once per group + q + one state per row written;
  cascade_suffix: suffix KV + q + one state per row; cascade_merge: two states read per row + bf16 out;
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
    prefix_once = c.n_groups * P * kvt
    suffix = B * S * kvt
    if kernel in ("decode_shared", "decode_dup"):
        b = B * (P + S) * kvt + 2 * qb
        u = (prefix_once + suffix + 2 * qb) if kernel == "decode_shared" else b
        return {"bytes": b, "unique_bytes": u, "flops": attn_flops(c, P + S)}
    if kernel == "cascade_prefix":
        b = prefix_once + qb + _state_bytes(c)
        return {"bytes": b, "unique_bytes": b, "flops": attn_flops(c, P)}
    if kernel == "cascade_suffix":
        b = suffix + qb + _state_bytes(c)
        return {"bytes": b, "unique_bytes": b, "flops": attn_flops(c, S)}
    if kernel == "cascade_merge":
        b = 2 * _state_bytes(c) + qb
        return {"bytes": b, "unique_bytes": b, "flops": 3 * 2 * B * c.num_q_heads * c.head_dim}
    if kernel == "cascade_total":
        b = prefix_once + suffix + 2 * qb
        return {"bytes": b, "unique_bytes": b, "flops": attn_flops(c, P + S)}
    raise ValueError(f"unknown kernel {kernel!r}")
