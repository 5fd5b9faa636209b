"""The attention kernels' bytes and FLOPs, one formula each, shared by the planner's attention ops
(ops/decode.py, ops/cascade_prefix.py, ops/cascade_suffix.py, ops/cascade_merge.py, and the per-GPU constants
of cost/step_shape.py) and the fits (calibration/fitting.py `features`), so that a fitted rate means the same
thing when the planner applies it.

Per-token constants take `layers` (1: one layer, as the probe times a kernel; the model's layers: a whole step).
Work functions take token counts (summed over sequences) and those constants, in that order of
multiplication: token counts past 2^53 / bytes per token round, and the planner and the fits must round alike.
Pure numpy."""

from __future__ import annotations

# Partial attention outputs and their LSE are kept in fp32 between the passes and the merge.
STATE_BYTES_PER_ELEMENT = 4.0


def kv_token_bytes(kv_heads, row_bytes, layers=1):
    """KV cache bytes of one token: K and V rows of `row_bytes` each (head dim x element bytes, plus scales),
    every KV head, `layers` layers."""
    return 2 * layers * kv_heads * row_bytes


def query_token_flops(q_heads, qk_dim, v_dim, layers=1):
    """FLOP of one query sequence against one cached token: QK^T and PV, 2 FLOP per multiply-add, every
    query head, `layers` layers."""
    return 2.0 * (qk_dim + v_dim) * q_heads * layers


def merge_state_bytes(q_heads, v_dim, layers=1):
    """The merge's traffic per sequence and level: it reads two (output, LSE) states and writes one."""
    return 3.0 * (q_heads * (v_dim + 1) * STATE_BYTES_PER_ELEMENT) * layers


def kv_read_bytes(tokens, kv_bytes_per_token):
    """Bytes a kernel reads streaming `tokens` KV tokens."""
    return tokens * kv_bytes_per_token


def attention_flops(query_tokens, flop_per_query_token, *computed_per_useful):
    """FLOP of `query_tokens` (query sequences x cached tokens): useful ones, or, given the kernels' computed
    per useful FLOP factors (padded tiles: ops/tiles.py decode_compute_factor, prefix_compute_factor, MLA's
    mla_tile_factor), the FLOP the kernel computes."""
    out = query_tokens * flop_per_query_token
    for f in computed_per_useful:
        out = out * f
    return out


def merge_bytes(sequence_levels, state_bytes, traffic=None):
    """The merge's bytes over `sequence_levels` (sequences x levels merged); `traffic` the planner's switch
    (CostParams.merge_traffic: the seed's arithmetic leaves it out)."""
    out = sequence_levels * state_bytes
    return out if traffic is None else out * traffic
