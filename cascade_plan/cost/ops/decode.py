"""Per-sequence decode attention: one kernel per layer over each sequence's whole context, the fitted kernel of
the calibration's backend (GQA or MLA: the same terms with an MLA GpuShape, cost/ops/mla_attention.py). Over
shared prefix pages (prefix caching) a share of the redundant re-reads comes from L2 (cost/roofline.py
`l2_hit_fraction`), though every logical byte still streams through L2; without prefix caching each sequence
reads its own copy (the `decode_dup` fit). The probe's own kernel reads a block of siblings' shared pages once
where its launch rule forms one (cost/ops/page_blocks.py): those tokens leave the bytes, re-reads and FLOP. Inside
the measured grid the step replaces this time by the measured rows' (cost/cost_model.py)."""

from __future__ import annotations

import numpy as np

from cascade_plan.cost.cost_params import KernelParams
from cascade_plan.cost.ops.attention_work import attention_flops, kv_read_bytes
from cascade_plan.cost.ops.base import OpCost
from cascade_plan.cost.ops.context import PER_SEQUENCE, StepContext
from cascade_plan.cost.ops.page_blocks import load_longest_program, load_saved_tokens
from cascade_plan.cost.ops.tiles import decode_compute_factor
from cascade_plan.cost.roofline import corrected_roofline_s, fixed_s, l2_hit_fraction, surface_corrected

NAME, MODES, TERM, COMPOSED = "decode", (PER_SEQUENCE,), "attention", None


def logical_bytes(ctx: StepContext) -> np.ndarray:
    """Every sequence's whole context, as if none of it came from L2."""
    assert ctx.load is not None and ctx.shape is not None
    return kv_read_bytes(ctx.load.ps_prefix_tokens + ctx.load.suffix_tokens, ctx.shape.kv_bytes_per_token)


def spared_tokens(ctx: StepContext) -> np.ndarray | float:
    """Shared tokens a page block of the probe's own kernel reads once for its siblings (summed over sequences):
    the other siblings' reads of them cost no HBM, L2 or compute. 0 without prefix caching or without the rule."""
    inputs = ctx.attention_inputs()
    if inputs is None or not ctx.prefix_caching:
        return 0.0
    load, g, params = inputs
    return load_saved_tokens(params.page_blocks, load, g.kv_heads, ctx.q_per_kv, head_dim=ctx.model.head_dim)


def cost(ctx: StepContext) -> OpCost | None:
    inputs = ctx.attention_inputs()
    if inputs is None:
        return None
    load, g, params = inputs
    kvb, L, bw = g.kv_bytes_per_token, g.layers, g.hbm_bytes_per_s
    node_bytes = kv_read_bytes(load.node_tokens, kvb)
    hit: np.ndarray | float = 0.0
    if ctx.prefix_caching and node_bytes.size:
        hit = l2_hit_fraction(params, node_bytes.sum(0) / L, g.l2_bytes)
    rows, G = ctx.kernel_rows, ctx.q_per_kv
    spared = spared_tokens(ctx)
    tokens = load.ps_prefix_tokens + load.suffix_tokens - spared
    logical = logical_bytes(ctx)
    read = logical - kv_read_bytes(spared, kvb)
    hbm = read - hit * np.maximum(load.node_redundant_tokens.sum(0) - spared, 0.0) * kvb
    dec = params.decode if ctx.prefix_caching or params.decode_dup is None else params.decode_dup
    computed = attention_flops(tokens, g.attn_flop_per_query_token, ctx.decode_tile_factor(),
                               float(decode_compute_factor(G, params.decode_rows)))
    # the probe's own kernel splits a long row: its latency bound streams its longest program (as its fit's rows)
    longest = (load_longest_program(params.page_blocks, load, g.kv_heads, G, blocks_only=False,
                                    private=not ctx.prefix_caching, head_dim=ctx.model.head_dim)
               if params.page_blocks is not None else load.longest_context)
    roof = corrected_roofline_s(hbm, computed, bw, g.attn_flop_per_s, dec, L, rows, size=logical,
                                longest_tokens=longest)
    if ctx.prefix_caching and params.l2_bytes_per_s:
        # every byte read still streams through L2 (same correction surface as the HBM term)
        l2_bound = corrected_roofline_s(read, 0.0, params.l2_bytes_per_s, g.attn_flop_per_s,
                                        KernelParams(surface=dec.surface), L, rows, size=logical)
        roof = np.maximum(roof, l2_bound)
    if ctx.prefix_caching and dec.program_token_s:
        # the busiest program's own streaming adds to the bounds (calibration/fitting.py roofline_part), under the
        # same correction surface: a page block's first program reads the shared run, then its sequences' tails
        program = (L * load_longest_program(params.page_blocks, load, g.kv_heads, G, head_dim=ctx.model.head_dim)
                   * dec.program_token_s)
        roof = roof + surface_corrected(program, dec, L, rows, logical)
    return OpCost(name=NAME, bytes=hbm, flops=attention_flops(load.ps_prefix_tokens + load.suffix_tokens,
                                                              g.attn_flop_per_query_token),
                  time_s=roof + fixed_s(dec, 1, rows, L, G), source=fitted_source(params), bound_s=roof)


def fitted_source(params) -> str:
    """An attention op's source where the fitted kernels price it (the ideal and default modes say so)."""
    if params.mode != "calibrated":
        return params.mode
    return f"fitted model ({params.backend} kernels)" if params.backend else "fitted model"
