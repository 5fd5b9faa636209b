"""The bytes-and-FLOPs cost of one decode step, per-sequence vs cascade attention. Pure numpy.

Every quantity is per GPU after tensor parallelism, in SI units (bytes, FLOP, seconds). Every term
is a roofline, max(bytes / achieved bandwidth, FLOP / achieved FLOP/s), plus a fixed cost per kernel
launch per layer; a step is the weight GEMMs plus the attention terms of its mode.
"""

from __future__ import annotations

import msgspec
import numpy as np

from cascade_plan.cost.cost_params import CostParams, KernelParams
from cascade_plan.cost.moe_routing import expected_experts_touched
from cascade_plan.cost.ops.attention import (
    SingleLevel,
    decode_compute_factor,
    measured_layer_s,
    outside_reason,
    overlapped_total,
    prefix_compute_factor,
    private_level,
    single_level,
)
from cascade_plan.cost.step_terms import step_terms
from cascade_plan.inputs.dtypes import ELEMENT_BYTES, kv_row_bytes
from cascade_plan.inputs.hardware import HardwareProfile
from cascade_plan.inputs.model_spec import ModelSpec

# Partial attention outputs and their LSE are kept in fp32 between the passes and the merge.
STATE_BYTES_PER_ELEMENT = 4.0


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
    return 2 * model.num_layers * kv_heads_per_gpu(model, tp) * kv_row_bytes(kv_dtype, model.head_dim)


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
    state = hq * (model.attn_v_dim + 1) * STATE_BYTES_PER_ELEMENT
    return GpuShape(
        layers=model.num_layers,
        q_heads=hq,
        kv_heads=kv_heads_per_gpu(model, tp),
        kv_bytes_per_token=kv_bytes_per_token(model, kv_dtype, tp),
        # QK^T and PV: 2 FLOP per multiply-add, every query head on this rank.
        attn_flop_per_query_token=2.0 * (model.attn_qk_dim + model.attn_v_dim) * hq * model.num_layers,
        merge_bytes_per_seq_level=3.0 * state * model.num_layers,
        hbm_bytes_per_s=hw.hbm_bytes_per_s,
        attn_flop_per_s=hw.dense_bf16_flop_per_s,
        gemm_flop_per_s=hw.flop_per_s(weight_dtype),
        l2_bytes=hw.l2_bytes,
    )


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


class StepCosts(msgspec.Struct, frozen=True):
    """Per decode step k = 1..K (arrays of shape (K,)); bytes are HBM bytes unless named logical."""

    steps: np.ndarray
    active_seqs: np.ndarray
    weight_bytes: np.ndarray
    weight_flops: np.ndarray
    weight_s: np.ndarray
    # per-sequence attention
    ps_attention_bytes: np.ndarray       # logical: every sequence reads its whole context
    ps_hbm_bytes: np.ndarray             # after L2 hits on shared prefix pages
    ps_prefix_bytes: np.ndarray          # logical prefix part of ps_attention_bytes
    ps_flops: np.ndarray
    ps_attention_s: np.ndarray
    ps_step_s: np.ndarray
    # cascade attention
    cas_prefix_bytes: np.ndarray
    cas_suffix_bytes: np.ndarray
    cas_merge_bytes: np.ndarray
    cas_prefix_flops: np.ndarray
    cas_suffix_flops: np.ndarray
    cas_prefix_s: np.ndarray
    cas_suffix_s: np.ndarray
    cas_merge_s: np.ndarray
    cas_levels: np.ndarray               # cascade levels in use at each step
    cas_attention_s: np.ndarray
    cas_step_s: np.ndarray
    # the rest of the step, the same in both modes (zeros when the params carry no StepParts)
    glue_s: np.ndarray | None = None
    comm_s: np.ndarray | None = None
    # 1 where a mode's attention was interpolated from measured rows (cost/ops/attention.py), 0 where the
    # fitted kernels priced it (None: no rows to interpolate); and why the fitted model priced steps (empty: none)
    ps_measured: np.ndarray | None = None
    cas_measured: np.ndarray | None = None
    ps_outside: tuple[str, ...] = ()       # a tuple, not a str: run_load broadcasts every scalar field
    cas_outside: tuple[str, ...] = ()

    @property
    def other_s(self) -> np.ndarray:
        """Everything but attention: GEMMs (weight_s) + glue + communication."""
        return (self.weight_s + (0.0 if self.glue_s is None else self.glue_s)
                + (0.0 if self.comm_s is None else self.comm_s))

    @property
    def cas_attention_bytes(self) -> np.ndarray:
        return self.cas_prefix_bytes + self.cas_suffix_bytes + self.cas_merge_bytes

    @property
    def speedup(self) -> np.ndarray:
        return self.ps_step_s / self.cas_step_s


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


def step_costs(load: StepLoad, g: GpuShape, model: ModelSpec, weight_dtype: str, tp: int,
               params: CostParams, prefix_caching: bool = True, steps: np.ndarray | None = None) -> StepCosts:
    """Weights, per-sequence and cascade terms of the steps described by `load`."""
    kvb, L, bw = g.kv_bytes_per_token, g.layers, g.hbm_bytes_per_s
    seqs = load.active_seqs
    # Weights: the same in both modes.
    w_bytes = weight_bytes_per_gpu(model, weight_dtype, tp, seqs)
    w_flops = gemm_flops_per_gpu(model, tp, seqs)
    if params.step is None:
        w_s = roofline_s(w_bytes, w_flops, bw, g.gemm_flop_per_s, params.gemm) + L * params.gemm.overhead_s
        glue_s = comm_s = np.zeros_like(np.asarray(seqs, float))
        kv_append_s: np.ndarray | float = 0.0
    else:
        terms = step_terms(model, tp, weight_dtype, seqs, params.step, bw, g.gemm_flop_per_s)
        w_s, glue_s, comm_s = terms.gemm_s, terms.glue_s, terms.comm_s
        kv_append_s = terms.kv_append_s   # per-sequence decode includes it (AIC); cascade kernels do not
    other_s = w_s + glue_s + comm_s

    # Per-sequence: one decode kernel per layer over each sequence's whole context.
    ps_tokens = load.ps_prefix_tokens + load.suffix_tokens
    node_bytes = load.node_tokens * kvb
    hit: np.ndarray | float = 0.0
    if prefix_caching and node_bytes.size:
        hit = l2_hit_fraction(params, node_bytes.sum(0) / L, g.l2_bytes)
    ps_bytes = ps_tokens * kvb
    ps_hbm = ps_bytes - hit * load.node_redundant_tokens.sum(0) * kvb
    ps_flops = ps_tokens * g.attn_flop_per_query_token
    rows = seqs * g.kv_heads
    G = g.q_heads // g.kv_heads
    # FLOP as the kernels compute them: the probe's MLA kernels fill whole tiles of query rows
    # (cost/ops/mla_attention.py); the GQA prefix pass whole 128-row tiles past one, of a prompt's rows per KV
    # head or per query head as the backend lays them out (params.prefix_rows)
    mla = params.attention_kind == "mla"
    if mla:
        from cascade_plan.cost.ops.mla_attention import mla_tile_factor
    one_tile = mla_tile_factor(g.q_heads) if mla else 1.0
    dec = params.decode if prefix_caching or params.decode_dup is None else params.decode_dup
    ps_computed = ps_flops * one_tile * float(decode_compute_factor(G, params.decode_rows))
    ps_roof = corrected_roofline_s(ps_hbm, ps_computed, bw, g.attn_flop_per_s, dec, L, rows, size=ps_bytes,
                                   longest_tokens=load.longest_context)
    if prefix_caching and params.l2_bytes_per_s:
        # every logical byte still streams through L2 (same correction surface as the HBM term)
        l2_bound = corrected_roofline_s(ps_bytes, 0.0, params.l2_bytes_per_s, g.attn_flop_per_s,
                                        KernelParams(surface=dec.surface), L, rows, size=ps_bytes)
        ps_roof = np.maximum(ps_roof, l2_bound)
    ps_attn = ps_roof + fixed_s(dec, 1, rows, L, G)

    # Cascade: one prefix launch per level (each node read once), a suffix pass, a merge per level.
    node_flops = load.node_query_tokens * g.attn_flop_per_query_token
    # the pass computes whole tiles of each prompt's query rows per KV head (readers per instance x G)
    readers = np.asarray(load.node_query_tokens, float) / np.maximum(np.asarray(load.node_tokens, float), 1e-300)
    tiles = mla_tile_factor(readers * G) if mla else prefix_compute_factor(readers, G, params.prefix_rows)
    pre_roof = corrected_roofline_s(node_bytes, node_flops * tiles, bw, g.attn_flop_per_s,
                                    params.prefix, L, rows, longest_tokens=load.node_instance_tokens).sum(0)
    pre_s = pre_roof + fixed_s(params.prefix, load.levels_on, rows * load.levels_on, L, G)
    suf_bytes = load.suffix_tokens * kvb
    suf_flops = load.suffix_tokens * g.attn_flop_per_query_token
    suf_roof = corrected_roofline_s(suf_bytes, suf_flops * one_tile, bw, g.attn_flop_per_s, params.suffix, L, rows,
                                    longest_tokens=load.longest_suffix)
    suf_s = suf_roof + fixed_s(params.suffix, 1, rows, L, G)
    merge_bytes = load.levels_on * seqs * g.merge_bytes_per_seq_level * params.merge_traffic
    merge_s = (corrected_roofline_s(merge_bytes, 0.0, bw, g.attn_flop_per_s, params.merge, L, rows,
                                    size=node_bytes.sum(0) + suf_bytes, longest_tokens=load.longest_context)
               + fixed_s(params.merge, load.levels_on, rows * load.levels_on, L, G))
    cas_attn = pre_s + suf_s + merge_s
    if params.prefix_suffix_overlap:
        cas_attn = overlapped_total(pre_s, suf_s, pre_roof, suf_roof, params.prefix_suffix_overlap) + merge_s
    # Inside the measured grid, the measured rows (cost/ops/attention.py) instead of the fitted kernels.
    m = measured_attention(load, g, model, params, prefix_caching, ps_attn, cas_attn)
    if m is not None:
        ps_meas, cas_meas, ps_why, cas_why = m
        ps_attn = np.where(np.isfinite(ps_meas), ps_meas, ps_attn)
        # the measured cascade is one time for all its passes: split it in the fitted passes' proportions
        scale = np.where(np.isfinite(cas_meas), cas_meas / np.maximum(cas_attn, 1e-300), 1.0)
        pre_s, suf_s, merge_s = pre_s * scale, suf_s * scale, merge_s * scale
        cas_attn = np.where(np.isfinite(cas_meas), cas_meas, cas_attn)
    # the new token's K/V write where the per-sequence timings include it and the cascade kernels do not
    cas_attn = cas_attn + kv_append_s
    # A step where no shared node has two readers shares nothing: cascade is then a per-sequence kernel
    # split in pieces, never cheaper than the per-sequence kernel itself (fitted parameters of different
    # kernels must not turn into a "win" without sharing).
    cas_attn = np.where(load.node_redundant_tokens.sum(0) > 0, cas_attn, np.maximum(cas_attn, ps_attn))

    return StepCosts(
        steps=steps if steps is not None else np.zeros(0), active_seqs=seqs, weight_bytes=w_bytes,
        weight_flops=w_flops, weight_s=w_s, ps_attention_bytes=ps_bytes, ps_hbm_bytes=ps_hbm,
        ps_prefix_bytes=load.ps_prefix_tokens * kvb, ps_flops=ps_flops, ps_attention_s=ps_attn,
        ps_step_s=other_s + ps_attn, cas_prefix_bytes=node_bytes.sum(0), cas_suffix_bytes=suf_bytes,
        cas_merge_bytes=merge_bytes, cas_prefix_flops=node_flops.sum(0), cas_suffix_flops=suf_flops,
        cas_prefix_s=pre_s, cas_suffix_s=suf_s, cas_merge_s=merge_s, cas_levels=load.levels_on,
        cas_attention_s=cas_attn, cas_step_s=other_s + cas_attn, glue_s=glue_s, comm_s=comm_s,
        ps_measured=None if m is None else np.isfinite(ps_meas).astype(float),
        cas_measured=None if m is None else np.isfinite(cas_meas).astype(float),
        ps_outside=() if m is None or ps_why is None else (ps_why,),
        cas_outside=() if m is None or cas_why is None else (cas_why,),
    )


def measured_attention(load: StepLoad, g: GpuShape, model: ModelSpec, params: CostParams, prefix_caching: bool,
                       fitted_ps_s=None, fitted_cas_s=None):
    """All layers' attention time of each mode interpolated from the calibration's measured rows (NaN
    where they do not bracket the step; given each mode's fitted time, the rows' ratio to the fit is
    what is interpolated), and why the fitted model prices the rest; None when the calibration carries
    no rows (ideal, defaults; an imported file carries per-sequence decode rows only)."""
    if params.measured is None:
        return None
    sl = single_level(load)
    shape = (g.q_heads // g.kv_heads, g.kv_heads, model.head_dim)
    mla = model.attention == "mla"
    if mla and params.measured.kind == "mla":     # the probe's MLA rows: keyed by query heads per GPU
        from cascade_plan.cost.ops.mla_attention import model_shape_key

        shape, mla = model_shape_key(model, g.q_heads), False
    out = []
    for kernel, fitted in (("per_sequence" if prefix_caching else "per_sequence_dup", fitted_ps_s),
                           ("cascade", fitted_cas_s)):
        rows_kernel = kernel
        if params.measured.private and kernel != "cascade":
            # rows over private pages, queried by sequences and context: every per-sequence decode without
            # prefix caching, and with it where no shared token has a second reader (pages then private)
            sl = private_level(load)
            rows_kernel = "per_sequence_dup"
            if kernel == "per_sequence":
                sl = SingleLevel(sl.coords, sl.valid & (np.asarray(load.node_redundant_tokens, float).sum(0) <= 0))
        elif params.measured.private:
            sl = single_level(load)
        per_layer = None if fitted is None else np.asarray(fitted, float) / g.layers
        t = (np.full(sl.valid.shape, np.nan) if mla
             else measured_layer_s(params.measured, rows_kernel, shape, sl, per_layer))
        out.append((g.layers * t, outside_reason(params.measured, kernel, shape, sl, np.isfinite(t), mla)))
    (ps, ps_why), (cas, cas_why) = out
    return ps, cas, ps_why, cas_why
