"""The cascade's suffix pass: a per-sequence decode over each sequence's private tokens only (its own prompt
and what it generated), one launch per step."""

from __future__ import annotations

from cascade_plan.cost.ops.attention_work import attention_flops, kv_read_bytes
from cascade_plan.cost.ops.base import OpCost
from cascade_plan.cost.ops.context import CASCADE, StepContext
from cascade_plan.cost.ops.decode import fitted_source
from cascade_plan.cost.roofline import corrected_roofline_s, fixed_s

NAME, MODES, TERM, COMPOSED = "cascade_suffix", (CASCADE,), "attention", None


def cost(ctx: StepContext) -> OpCost | None:
    inputs = ctx.attention_inputs()
    if inputs is None:
        return None
    load, g, params = inputs
    L, rows = g.layers, ctx.kernel_rows
    b = kv_read_bytes(load.suffix_tokens, g.kv_bytes_per_token)
    computed = attention_flops(load.suffix_tokens, g.attn_flop_per_query_token, ctx.decode_tile_factor())
    roof = corrected_roofline_s(b, computed, g.hbm_bytes_per_s, g.attn_flop_per_s, params.suffix, L, rows,
                                longest_tokens=load.longest_suffix)
    return OpCost(name=NAME, bytes=b, flops=attention_flops(load.suffix_tokens, g.attn_flop_per_query_token),
                  time_s=roof + fixed_s(params.suffix, 1, rows, L, ctx.q_per_kv), source=fitted_source(params),
                  bound_s=roof)
