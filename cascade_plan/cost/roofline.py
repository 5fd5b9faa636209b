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
    if k.surface is not None:
        per_layer = np.asarray(bytes_ if size is None else size, float) / layers
        t = t * np.exp(k.surface(per_layer, rows))
    return t


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
