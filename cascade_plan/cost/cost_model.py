"""The bytes-and-FLOPs cost of one decode step, per-sequence vs cascade attention. Pure numpy.

Every quantity is per GPU after tensor parallelism, in SI units (bytes, FLOP, seconds). A step is the list of its
ops (cost/ops/registry.py), each priced alone from one `StepContext`: the non-attention ops, the same in both
modes and composed as cost/step_terms.py says, and the attention ops of its mode: the per-sequence decode, or
the cascade's prefix pass, suffix pass and merge (and the K/V append where the per-sequence decode holds it).
The cascade's passes then compose by the rules here: their overlap, the measured rows inside
the grid, no gain without sharing.
"""

from __future__ import annotations

import msgspec
import numpy as np

from cascade_plan.cost.cost_params import CostParams
from cascade_plan.cost.ops.attention import (
    FITTED,
    SingleLevel,
    measured_layer_s,
    outside_reason,
    overlapped_total,
    private_level,
    single_level,
)
from cascade_plan.cost.ops.attention_work import kv_read_bytes
from cascade_plan.cost.ops.base import OpCost
from cascade_plan.cost.ops.context import CASCADE, PER_SEQUENCE, StepContext
from cascade_plan.cost.ops.decode import spared_tokens
from cascade_plan.cost.ops.shape_anchor import ANCHORED, ANCHORED_SOURCE, anchored_layer_s
from cascade_plan.cost.roofline import corrected_roofline_s, fixed_s, l2_hit_fraction, roofline_s  # noqa: F401
from cascade_plan.cost.step_shape import (  # noqa: F401  (re-exported: callers import them here)
    GpuShape,
    StepLoad,
    gemm_flops_per_gpu,
    gpu_shape,
    kv_bytes_per_token,
    kv_heads_per_gpu,
    q_heads_per_gpu,
    single_level_load,
    weight_bytes_per_gpu,
    weight_params_read,
)
from cascade_plan.cost.step_terms import composed, priced_ops
from cascade_plan.inputs.model_spec import ModelSpec

# The cascade step's composition rule that is an entry of its op list after the passes, so that the list adds up
# to the step: what a step that shares nothing adds to reach the per-sequence kernel (>= 0 s). The passes' overlap
# is in their own entries instead (each its share of their joint time): every entry of the list is >= 0.
NO_SHARING = "cascade_no_sharing_floor"
CASCADE_RULES = (NO_SHARING,)
ATTENTION_PASSES = ("cascade_prefix", "cascade_suffix", "cascade_merge")
ATTENTION_OPS = ("decode", *ATTENTION_PASSES)   # the ops whose times the measured rows replace inside the grid


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
    ps_spared_bytes: np.ndarray          # of ps_prefix_bytes, what page blocks read once for siblings (own kernel)
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
    # 1 where the fitted time was scaled to the shape's own rows outside their grid (cost/ops/shape_anchor.py)
    ps_anchored: np.ndarray | None = None
    cas_anchored: np.ndarray | None = None
    ps_outside: tuple[str, ...] = ()       # a tuple, not a str: run_load broadcasts every scalar field
    cas_outside: tuple[str, ...] = ()
    # each mode's step as its list of ops (cost/ops/registry.py, then the cascade's composition rules:
    # CASCADE_RULES); their times add up to ps_step_s and cas_step_s
    ps_ops: tuple[OpCost, ...] = ()
    cas_ops: tuple[OpCost, ...] = ()

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


def step_costs(load: StepLoad, g: GpuShape, model: ModelSpec, weight_dtype: str, tp: int,
               params: CostParams, prefix_caching: bool = True, steps: np.ndarray | None = None) -> StepCosts:
    """Weights, per-sequence and cascade terms of the steps described by `load`."""
    kvb, seqs = g.kv_bytes_per_token, load.active_seqs
    ctx = StepContext(model, tp, weight_dtype, seqs, g.hbm_bytes_per_s, g.gemm_flop_per_s, params.step, params, g,
                      load, prefix_caching)
    priced = priced_ops(ctx)
    terms = composed(priced, params.step, weight_dtype, seqs)
    w_s, glue_s, comm_s, kv_append_s = terms.gemm_s, terms.glue_s, terms.comm_s, terms.kv_append_s
    other_s = w_s + glue_s + comm_s
    shared = {op.name: op for op in terms.ops}
    ops = {op.name: op for _, op in priced}

    # Per-sequence: one decode kernel per layer over each sequence's whole context.
    dec = ops["decode"]
    ps_attn = dec.time_s
    # Cascade: one prefix launch per level (each node read once), a suffix pass, a merge per level.
    pre, suf, mer = (ops[k] for k in ATTENTION_PASSES)
    pre_s, suf_s, merge_s = pre.time_s, suf.time_s, mer.time_s
    cas_attn = pre_s + suf_s + merge_s
    if params.prefix_suffix_overlap:
        cas_attn = overlapped_total(pre_s, suf_s, pre.bound_s, suf.bound_s, params.prefix_suffix_overlap) + merge_s
    # Inside the measured grid, the measured rows (cost/ops/attention.py) instead of the fitted kernels.
    m = measured_attention(load, g, model, params, prefix_caching, ps_attn, cas_attn, pre_s)
    if m is not None:
        ps_meas, cas_meas, ps_why, cas_why, ps_anchor, cas_anchor = m
        # outside the rows' grid, a shape the fit never saw is scaled to its own rows (cost/ops/shape_anchor.py)
        ps_attn = np.where(np.isfinite(ps_meas), ps_meas, np.where(np.isfinite(ps_anchor), ps_anchor, ps_attn))
        cas_priced = np.where(np.isfinite(cas_meas), cas_meas, cas_anchor)
        # the measured cascade is one time for all its passes: split it in the fitted passes' proportions
        scale = np.where(np.isfinite(cas_priced), cas_priced / np.maximum(cas_attn, 1e-300), 1.0)
        pre_s, suf_s, merge_s = pre_s * scale, suf_s * scale, merge_s * scale
        cas_attn = np.where(np.isfinite(cas_priced), cas_priced, cas_attn)
    passes_s = cas_attn
    # the new token's K/V write where the per-sequence timings include it and the cascade kernels do not
    cas_attn = cas_attn + kv_append_s
    # A step where no shared node has two readers shares nothing: cascade is then a per-sequence kernel
    # split in pieces, never cheaper than the per-sequence kernel itself (fitted parameters of different
    # kernels must not turn into a "win" without sharing).
    cas_attn = np.where(load.node_redundant_tokens.sum(0) > 0, cas_attn, np.maximum(cas_attn, ps_attn))

    ps_mask = None if m is None else np.isfinite(ps_meas)
    cas_mask = None if m is None else np.isfinite(cas_meas)
    ps_anch = None if m is None else np.isfinite(ps_anchor)       # NaN wherever the rows bracket the step
    cas_anch = None if m is None else np.isfinite(cas_anchor)
    words = params.measured.label if params.measured is not None else ""
    # In the list, the prefix and suffix passes run concurrently take their share of the time they take together
    # (cas_prefix_s and cas_suffix_s stay each pass alone).
    pre_in, suf_in, note = pre_s, suf_s, ""
    if params.prefix_suffix_overlap:
        alone = pre_s + suf_s
        share = np.where(alone > 0, np.maximum(passes_s - merge_s, 0.0) / np.maximum(alone, 1e-300), 1.0)
        pre_in, suf_in = pre_s * share, suf_s * share
        note = (f"; run {params.prefix_suffix_overlap:.0%} concurrently with the other pass (calibrated): "
                "its share of their joint time")
    attention = {
        "decode": _timed(dec, ps_attn, ps_mask, words, anchored=ps_anch),
        "cascade_prefix": _timed(pre, pre_in, cas_mask, words, note, cas_anch),
        "cascade_suffix": _timed(suf, suf_in, cas_mask, words, note, cas_anch),
        "cascade_merge": _timed(mer, merge_s, cas_mask, words, anchored=cas_anch),
    }
    rules = [_rule(NO_SHARING, cas_attn - (passes_s + kv_append_s),
                   "no shared node has two readers: cascade no faster than the per-sequence decode")]
    mode_ops = {}
    for mode in (PER_SEQUENCE, CASCADE):
        mode_ops[mode] = tuple(attention.get(op.name, shared.get(op.name, op)) for mod, op in priced
                               if mode in getattr(mod, "MODES"))
    ps_prefix_bytes = kv_read_bytes(load.ps_prefix_tokens, kvb)
    return StepCosts(
        steps=steps if steps is not None else np.zeros(0), active_seqs=seqs,
        weight_bytes=weight_bytes_per_gpu(model, weight_dtype, tp, seqs),
        weight_flops=gemm_flops_per_gpu(model, tp, seqs),
        weight_s=w_s, ps_attention_bytes=kv_read_bytes(load.ps_prefix_tokens + load.suffix_tokens, kvb),
        ps_hbm_bytes=dec.bytes, ps_prefix_bytes=ps_prefix_bytes,
        ps_spared_bytes=np.zeros_like(ps_prefix_bytes) + kv_read_bytes(spared_tokens(ctx), kvb), ps_flops=dec.flops,
        ps_attention_s=ps_attn, ps_step_s=other_s + ps_attn, cas_prefix_bytes=pre.bytes, cas_suffix_bytes=suf.bytes,
        cas_merge_bytes=mer.bytes, cas_prefix_flops=pre.flops, cas_suffix_flops=suf.flops,
        cas_prefix_s=pre_s, cas_suffix_s=suf_s, cas_merge_s=merge_s, cas_levels=load.levels_on,
        cas_attention_s=cas_attn, cas_step_s=other_s + cas_attn, glue_s=glue_s, comm_s=comm_s,
        ps_measured=None if ps_mask is None else ps_mask.astype(float),
        cas_measured=None if cas_mask is None else cas_mask.astype(float),
        ps_anchored=None if ps_anch is None else ps_anch.astype(float),
        cas_anchored=None if cas_anch is None else cas_anch.astype(float),
        ps_outside=() if m is None or ps_why is None else (ps_why,),
        cas_outside=() if m is None or cas_why is None else (cas_why,),
        ps_ops=mode_ops[PER_SEQUENCE], cas_ops=mode_ops[CASCADE] + tuple(rules),
    )


def _timed(op: OpCost, time_s, measured, words: str, note: str = "", anchored=None) -> OpCost:
    """An attention op at its time in the step, and where that time comes from (measured rows on all, some or none
    of the steps: the fitted kernels' own source, scaled to the shape's own rows where `anchored`)."""
    source, elsewhere = op.source, FITTED
    if anchored is not None and np.any(anchored):
        source, elsewhere = f"{source} scaled to this shape's measured rows", ANCHORED_SOURCE
    if measured is not None and np.any(measured):
        source = words if np.all(measured) else f"{words} where the rows bracket the step, {elsewhere} elsewhere"
    return msgspec.structs.replace(op, time_s=time_s, source=source + note)


def _rule(name: str, time_s, source: str) -> OpCost:
    z = np.zeros_like(np.asarray(time_s, float))
    return OpCost(name=name, bytes=z, flops=z, time_s=time_s, source=source)


def measured_attention(load: StepLoad, g: GpuShape, model: ModelSpec, params: CostParams, prefix_caching: bool,
                       fitted_ps_s=None, fitted_cas_s=None, fitted_prefix_s=None):
    """All layers' attention time of each mode interpolated from the calibration's measured rows (NaN
    where they do not bracket the step; given each mode's fitted time, the rows' ratio to the fit is
    what is interpolated), and why the fitted model prices the rest; then each mode's time where a shape the
    fit never saw is scaled to its own rows outside their grid (NaN elsewhere; the cascade pass by pass where its
    prefix pass's fitted time, `fitted_prefix_s`, is given). None when the calibration
    carries no rows (ideal, defaults; an imported file carries per-sequence decode rows only)."""
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
        why = outside_reason(params.measured, kernel, shape, sl, np.isfinite(t), mla)
        pre_layer = (None if kernel != "cascade" or fitted_prefix_s is None
                     else np.asarray(fitted_prefix_s, float) / g.layers)
        a = (np.full(sl.valid.shape, np.nan) if mla or params.measured.private
             else anchored_layer_s(params.measured, rows_kernel, shape, sl, per_layer, t, pre_layer))
        if why is not None and np.isfinite(a).any():
            why += f"; {ANCHORED}"
        out.append((g.layers * t, why, g.layers * a))
    (ps, ps_why, ps_a), (cas, cas_why, cas_a) = out
    return ps, cas, ps_why, cas_why, ps_a, cas_a
