"""The dense weight GEMMs of every layer (qkv, o, gate_up, down; an MoE model's shared experts), per GPU
after tensor parallelism: column-parallel qkv and gate_up, row-parallel o and down. The lm_head is its
own op (ops/lm_head.py), the routed experts too (ops/moe.py).

Time per GEMM from the calibration's `StepParts`: the measured per-shape table where the shape lies
inside it, else the (M, weight bytes) ratio table (cost/step_parts.py `gemm_time_s`)."""

from __future__ import annotations

import numpy as np

from cascade_plan.cost.ops.base import OpCost
from cascade_plan.cost.ops.context import BOTH, StepContext
from cascade_plan.cost.step_parts import StepParts, gemm_time_s

NAME, MODES, TERM, COMPOSED = "gemm", BOTH, "gemm", "dense"
ACTIVATION_BYTES = 2.0   # bf16 activations in and out of every GEMM


def gemm_table_key(parts: StepParts, weight_dtype: str) -> str:
    """The efficiency table a weight dtype is priced from: its own, fp8's for any fp8 variant, else bf16."""
    if weight_dtype in parts.gemm:
        return weight_dtype
    if weight_dtype.startswith("fp8") and "fp8" in parts.gemm:
        return "fp8"
    return "bf16" if "bf16" in parts.gemm else next(iter(parts.gemm))


def layer_gemms(model, tp: int) -> list[tuple[str, float, float, float]]:
    """(name, N, K, count per step) of the dense GEMMs of one step per GPU, the lm_head last; routed
    experts excluded."""
    h = model.hidden_size
    if model.attention == "mla":
        qkv_n = model.attn_in_params_per_layer / (h * tp)
        o_k = model.num_q_heads * model.attn_v_dim / tp
    else:
        kv = max(1, -(-model.num_kv_heads // tp))
        qkv_n = (model.num_q_heads / tp + 2 * kv) * model.head_dim
        o_k = model.num_q_heads * model.head_dim / tp
    L = model.num_layers
    dense_layers = L - model.num_moe_layers
    out = [("qkv", qkv_n, h, L), ("o", h, o_k, L)]
    if dense_layers:
        out += [("gate_up", 2 * model.intermediate_size / tp, h, dense_layers),
                ("down", h, model.intermediate_size / tp, dense_layers)]
    if model.num_moe_layers and model.shared_expert_intermediate_size:
        si = model.shared_expert_intermediate_size / tp
        out += [("gate_up", 2 * si, h, model.num_moe_layers), ("down", h, si, model.num_moe_layers)]
    out.append(("lm_head", model.vocab_size / tp, h, 1))
    return out


def gemm_bytes_flops(m, n: float, k: float, element_bytes: float) -> tuple[np.ndarray, np.ndarray]:
    """HBM bytes (weights once, activations in and out) and FLOPs of one GEMM of M tokens."""
    m = np.asarray(m, float)
    return n * k * element_bytes + m * (n + k) * ACTIVATION_BYTES, 2.0 * m * n * k


def priced(name: str, shapes, m, parts: StepParts, weight_dtype: str, element_bytes: float,
           hbm_bytes_per_s: float, flop_per_s: float) -> OpCost:
    """The sum over `shapes` ((name, N, K, count)) of count x one GEMM's cost, in the order given."""
    m = np.asarray(m, float)
    key = gemm_table_key(parts, weight_dtype)
    eff, shape_table = parts.gemm[key], parts.gemm_shapes.get(key)
    t, b, f = np.zeros_like(m), np.zeros_like(m), np.zeros_like(m)
    for _, n, k, count in shapes:
        t = t + count * gemm_time_s(eff, m, n, k, element_bytes, hbm_bytes_per_s, flop_per_s, shape_table)
        bb, ff = gemm_bytes_flops(m, n, k, element_bytes)
        b, f = b + count * np.where(m > 0, bb, 0.0), f + count * ff
    return OpCost(name=name, bytes=b, flops=f, time_s=t, source=f"{parts.source}, {key} GEMM table")


def cost(ctx: StepContext) -> OpCost | None:
    """Every layer's dense GEMMs (not the lm_head) for decode steps of `ctx.tokens` tokens."""
    if ctx.parts is None:
        return None
    shapes = [s for s in layer_gemms(ctx.model, ctx.tp) if s[0] != "lm_head"]
    return priced(NAME, shapes, ctx.tokens, ctx.parts, ctx.weight_dtype, ctx.element_bytes, ctx.hbm_bytes_per_s,
                  ctx.flop_per_s)
