"""Rooflines with a kernel kind's calibrated efficiencies, fixed costs and L2 reuse: how every attention op
(cost/ops/) and the seed's weights term turn bytes and FLOPs into seconds. Pure numpy."""

from __future__ import annotations

import numpy as np

from cascade_plan.cost.cost_params import CostParams, KernelParams


def roofline_s(bytes_, flops, bw: float, peak: float, k: KernelParams) -> np.ndarray:
    return np.maximum(np.asarray(bytes_, float) / (bw * k.bw_eff), np.asarray(flops, float) / (peak * k.flop_eff))


def corrected_roofline_s(bytes_, flops, bw: float, peak: float, k: KernelParams, layers: int, rows,
                         size=None, longest_tokens=0.0) -> np.ndarray:
    """Roofline of a kernel kind over all layers (bandwidth, FLOP rate, and the latency of streaming
    the longest row where the kernel does not split it), times its calibrated efficiency correction
    at one layer's size (bytes, or `size`) and rows."""
    t = roofline_s(bytes_, flops, bw, peak, k)
    if k.token_latency_s:
        t = np.maximum(t, layers * np.asarray(longest_tokens, float) * k.token_latency_s)
    if k.filled_rows:
        t = t / filled_gain(k, rows, longest_tokens)
    return surface_corrected(t, k, layers, rows, bytes_ if size is None else size)


def surface_corrected(seconds, k: KernelParams, layers: int, rows, size) -> np.ndarray:
    """`seconds` of a kernel kind's roofline times its calibrated efficiency correction at one layer's size (bytes
    over all layers, `size`) and rows (unchanged without a surface)."""
    t = np.asarray(seconds, float)
    if k.surface is None:
        return t
    return t * np.exp(k.surface(np.asarray(size, float) / layers, rows))


def filled_on(k, rows, longest_tokens) -> np.ndarray:
    """Where a kernel kind with a batch-filled launch (filled_gain) takes it."""
    return ((np.asarray(rows, float) >= k.filled_rows) & (np.asarray(longest_tokens, float) > k.filled_min_tokens)
            & (k.filled_rows > 0))


def filled_gain(k, rows, longest_tokens, gain=None):
    """How many times faster a kernel kind streams where its batch alone fills the GPU: `k.filled_gain` (or
    `gain`) over whole tiles of `k.filled_tile_tokens` at `k.filled_rows` (sequence, KV head) rows per layer or
    more whose longest row holds more than `k.filled_min_tokens` tokens, 1 elsewhere. A row streams its tokens in
    whole tiles (513 tokens take five tiles of 128, as 640 would). `k`: a KernelParams or a fitted KernelFit (the
    same fields). The probe's Triton decode launches such a batch unsplit with 128-token tiles (64 elsewhere); on
    the H200 its fp8 decode then streams ~3.0 TB/s against ~2.1 TB/s below (docs/probe-notes.md)."""
    if not k.filled_rows:
        return 1.0
    tokens = np.maximum(np.asarray(longest_tokens, float), 1.0)
    on = filled_on(k, rows, tokens)
    tile = float(k.filled_tile_tokens)
    whole = tokens / (np.ceil(tokens / tile - 1e-9) * tile) if tile > 0 else 1.0
    return np.where(on, (k.filled_gain if gain is None else gain) * whole, 1.0)


def fixed_s(k: KernelParams, launches, rows, layers: int, q_per_kv: int = 1) -> np.ndarray:
    """Fixed costs of a kernel kind over all layers: per launch, plus per (sequence, KV head) row and
    per (sequence, query head) row."""
    rows = np.asarray(rows, float)
    return layers * (np.asarray(launches, float) * k.overhead_s + rows * (k.row_s + q_per_kv * k.q_row_s))


def l2_hit_fraction(params: CostParams, layer_working_set_bytes, l2_bytes: float) -> np.ndarray:
    """Share of redundant prefix re-reads a per-sequence kernel gets from L2: l2_hit_max up to the
    window (one layer's shared prefix, where the probe saw hits fall; None where it saw none), falling
    as window / working set beyond."""
    ws = np.maximum(np.asarray(layer_working_set_bytes, float), 1.0)
    if params.l2_window_bytes is None:       # no fall measured
        return params.l2_hit_max * np.ones_like(ws)
    return params.l2_hit_max * np.minimum(1.0, params.l2_window_bytes / ws)
