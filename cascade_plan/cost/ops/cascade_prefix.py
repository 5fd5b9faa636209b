"""The cascade's prefix pass: one launch per level, each shared node's KV read once by all the sequences under
it, a matrix-matrix product that turns compute-bound when enough queries share the node. FLOP as the kernels
compute them: whole tiles of a prompt's query rows (per KV head or per query head as the backend lays them out,
`CostParams.prefix_rows`; MLA's tiles of 64 or 128 rows)."""

from __future__ import annotations

import numpy as np

from cascade_plan.cost.ops.attention_work import attention_flops, kv_read_bytes
from cascade_plan.cost.ops.base import OpCost
from cascade_plan.cost.ops.context import CASCADE, StepContext
from cascade_plan.cost.ops.decode import fitted_source
from cascade_plan.cost.ops.prefix_programs import prefix_program
from cascade_plan.cost.ops.tiles import prefix_compute_factor
from cascade_plan.cost.roofline import corrected_roofline_s, fixed_s

NAME, MODES, TERM, COMPOSED = "cascade_prefix", (CASCADE,), "attention", None


def cost(ctx: StepContext) -> OpCost | None:
    inputs = ctx.attention_inputs()
    if inputs is None:
        return None
    load, g, params = inputs
    L, rows, G = g.layers, ctx.kernel_rows, ctx.q_per_kv
    node_bytes = kv_read_bytes(load.node_tokens, g.kv_bytes_per_token)
    # the pass computes whole tiles of each prompt's query rows per KV head (readers per instance x G)
    readers = np.asarray(load.node_query_tokens, float) / np.maximum(np.asarray(load.node_tokens, float), 1e-300)
    if ctx.mla:
        from cascade_plan.cost.ops.mla_attention import mla_tile_factor

        tiles = mla_tile_factor(readers * G)
    else:
        tiles = prefix_compute_factor(readers, G, params.prefix_rows)
    computed = attention_flops(load.node_query_tokens, g.attn_flop_per_query_token, tiles)
    # the latency bound, as the fit's rows took it: the probe's own pass (its launch rule known) streams its busiest
    # program's tokens x row tile, each level launched over its instances; other kernels a node's whole instance
    longest: np.ndarray = np.asarray(load.node_instance_tokens, float)
    if params.page_blocks is not None and not ctx.mla:
        inst = np.divide(np.asarray(load.node_tokens, float), longest, out=np.zeros(np.broadcast(
            np.asarray(load.node_tokens), longest).shape), where=longest > 0)
        longest = prefix_program(params.page_blocks, readers, G, g.kv_heads, inst, longest)
    roof = corrected_roofline_s(node_bytes, computed, g.hbm_bytes_per_s, g.attn_flop_per_s, params.prefix, L, rows,
                                longest_tokens=longest).sum(0)
    t = roof + fixed_s(params.prefix, load.levels_on, rows * load.levels_on, L, G)
    return OpCost(name=NAME, bytes=node_bytes.sum(0),
                  flops=attention_flops(load.node_query_tokens, g.attn_flop_per_query_token).sum(0), time_s=t,
                  source=fitted_source(params), bound_s=roof)
