"""The cascade's merge: one launch per level, combining each sequence's partial (output, LSE) states of the
prefix and suffix passes (two read, one written, fp32). Its efficiency surface is keyed by the KV bytes whose
states it combines, its latency by the longest context split across programs."""

from __future__ import annotations

import numpy as np

from cascade_plan.cost.ops.attention_work import kv_read_bytes, merge_bytes
from cascade_plan.cost.ops.base import OpCost
from cascade_plan.cost.ops.context import CASCADE, StepContext
from cascade_plan.cost.ops.decode import fitted_source
from cascade_plan.cost.roofline import corrected_roofline_s, fixed_s

NAME, MODES, TERM, COMPOSED = "cascade_merge", (CASCADE,), "attention", None


def cost(ctx: StepContext) -> OpCost | None:
    inputs = ctx.attention_inputs()
    if inputs is None:
        return None
    load, g, params = inputs
    L, rows, kvb = g.layers, ctx.kernel_rows, g.kv_bytes_per_token
    b = merge_bytes(load.levels_on * load.active_seqs, g.merge_bytes_per_seq_level, params.merge_traffic)
    merged_kv = kv_read_bytes(load.node_tokens, kvb).sum(0) + kv_read_bytes(load.suffix_tokens, kvb)
    t = (corrected_roofline_s(b, 0.0, g.hbm_bytes_per_s, g.attn_flop_per_s, params.merge, L, rows, size=merged_kv,
                              longest_tokens=load.longest_context)
         + fixed_s(params.merge, load.levels_on, rows * load.levels_on, L, ctx.q_per_kv))
    return OpCost(name=NAME, bytes=b, flops=np.zeros_like(np.asarray(b, float)), time_s=t,
                  source=fitted_source(params))
