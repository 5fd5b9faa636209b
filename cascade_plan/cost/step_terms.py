"""The non-attention terms of a decode step, priced from StepParts: the weight GEMMs of every layer and
the lm_head, the engine glue, and two all-reduces per layer under tensor parallelism. Pure numpy.

GEMM shapes per GPU after TP (column-parallel qkv and gate_up, row-parallel o and down, vocab-parallel
lm_head). MoE layers: the shared experts as a dense MLP, and the routed experts the batch touches as one
grouped GEMM per projection (as engines run them, e.g. fused_moe): the touched experts' weights
streamed once, each expert over its share of the tokens (uniform routing: M k / touched per expert),
priced from the table at that share and the group's total weight bytes, with one launch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cascade_plan.cost.glue_widths import layer_bytes_per_token, step_bytes_per_token
from cascade_plan.cost.step_parts import StepParts, gemm_time_s
from cascade_plan.inputs.dtypes import ELEMENT_BYTES

ACTIVATION_BYTES = 2.0   # bf16 activations: all-reduce messages and GEMM inputs/outputs


@dataclass(frozen=True)
class StepTerms:
    """Seconds per decode step, arrays over the step grid."""

    gemm_s: np.ndarray
    glue_s: np.ndarray
    comm_s: np.ndarray
    gemm_dtype: str          # the efficiency table used ("bf16" or "fp8")


def layer_gemms(model, tp: int) -> list[tuple[str, float, float, float]]:
    """(name, N, K, count per step) of the dense GEMMs of one step per GPU; routed experts excluded."""
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


def gemm_table_key(parts: StepParts, weight_dtype: str) -> str:
    if weight_dtype in parts.gemm:
        return weight_dtype
    if weight_dtype.startswith("fp8") and "fp8" in parts.gemm:
        return "fp8"
    return "bf16" if "bf16" in parts.gemm else next(iter(parts.gemm))


def step_terms(model, tp: int, weight_dtype: str, tokens, parts: StepParts, hbm_bytes_per_s: float,
               flop_per_s: float) -> StepTerms:
    """GEMM, glue and communication seconds of decode steps of `tokens` sequences (one token each)."""
    m = np.asarray(tokens, float)
    key = gemm_table_key(parts, weight_dtype)
    eff = parts.gemm[key]
    eb = ELEMENT_BYTES[weight_dtype]
    gemm = np.zeros_like(m)
    for _, n, k, count in layer_gemms(model, tp):
        gemm = gemm + count * gemm_time_s(eff, m, n, k, eb, hbm_bytes_per_s, flop_per_s)
    if model.num_moe_layers and model.num_experts:
        from cascade_plan.cost.cost_model import expected_experts_touched

        touched = np.maximum(expected_experts_touched(model, m), 1e-9)
        m_e = np.where(m > 0, m * model.experts_per_token / touched, 0.0)
        ei = model.moe_intermediate_size / tp
        h = model.hidden_size
        # one grouped GEMM per projection: N stacks the touched experts' output rows
        grouped = (gemm_time_s(eff, m_e, touched * 2 * ei, h, eb, hbm_bytes_per_s, flop_per_s)
                   + gemm_time_s(eff, m_e, touched * h, ei, eb, hbm_bytes_per_s, flop_per_s))
        gemm = gemm + model.num_moe_layers * grouped
    glue = parts.glue.time_s(m, model.num_layers, layer_bytes_per_token(model, tp), step_bytes_per_token(model, tp))
    if parts.composition is not None and parts.composition.applied:   # ops back to back vs each priced alone
        f = parts.composition.factor_at(key, m)
        gemm, glue = gemm * f, glue * f
    comm = np.zeros_like(m)
    ar = parts.allreduce_for(tp)
    if tp > 1 and ar is not None:
        comm = 2 * model.num_layers * ar.time_s(m * model.hidden_size * ACTIVATION_BYTES)
    return StepTerms(gemm_s=gemm, glue_s=glue, comm_s=comm, gemm_dtype=key)
