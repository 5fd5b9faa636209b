"""How much the engine's glue moves per token, per GPU: the basis on which a glue fit measured on one
model shape is carried to another.

The glue kernels are elementwise and memory-bound, so their per-token cost follows the bytes they read
and write per token (bf16 activations, 2 B), which depend on the model's widths per GPU after tensor
parallelism. Per layer, as vLLM/SGLang run them with FlashInfer's kernels:

* fused add-RMSNorm, twice: read the input and the residual, write both: 16 x hidden bytes. The hidden
  state is replicated under TP, so this term does not shrink with TP;
* RoPE on this GPU's query and key heads, in place (read + write): 4 x (Hq/TP + Hkv/TP) x head_dim;
  MLA rotates only its decoupled RoPE part: 4 x (Hq/TP + 1) x qk_rope_head_dim;
* the new token's K/V into the paged cache (read k and v, write both): 8 x Hkv/TP x head_dim;
  MLA appends its latent: 4 x (kv_lora_rank + qk_rope_head_dim);
* SiLU-and-mul (read gate and up, write their product): 6 x MLP width / TP; on MoE layers the width a
  token passes through is experts_per_token x the routed expert's width plus the shared expert's.

Once per step: the embedding gather (read a row, write it: 4 x hidden), the final add-RMSNorm
(8 x hidden), and argmax over this GPU's logits (vocab-parallel lm_head: 2 x vocab / TP).

The H200 probe's glue rows bear the basis out: Llama-3-8B at TP 2 against TP 1 is predicted at 0.68x per
token per layer and 0.58x per token per step; the fused rows measured 0.69x and 0.57x (slopes over
512-2048 tokens). Splitting everything by TP (hidden / TP) would predict 0.5x.
"""

from __future__ import annotations

ACT_BYTES = 2.0     # bf16 activations

# The shape every glue fit written before the basis was stored was measured on (calibration/step_fit.py's
# fit_glue default, and AIConfigurator imports transfer that fit): Llama-3-8B at TP 1.
# 16 x 4096 + 4 x (32 + 8) x 128 + 8 x 8 x 128 + 6 x 14336, and 12 x 4096 + 2 x 128256.
LEGACY_LAYER_BYTES_PER_TOKEN = 180_224.0
LEGACY_STEP_BYTES_PER_TOKEN = 305_664.0
LEGACY_BASIS = "llama-3-8b TP1"


def _per_gpu(heads: int, tp: int) -> float:
    return heads / tp if heads >= tp else 1.0      # fewer KV heads than GPUs: replicated


def layer_bytes_per_token(model, tp: int) -> float:
    """Glue bytes per token in one layer on one GPU (layers averaged where dense and MoE layers mix)."""
    h, hq = model.hidden_size, model.num_q_heads / tp
    if model.attention == "mla":
        rope = 2 * (hq + 1) * model.qk_rope_head_dim          # elements read + written
        append = 2 * (model.kv_lora_rank + model.qk_rope_head_dim)
    else:
        hkv = _per_gpu(model.num_kv_heads, tp)
        rope = 2 * (hq + hkv) * model.head_dim
        append = 4 * hkv * model.head_dim
    moe_width = model.experts_per_token * model.moe_intermediate_size + model.shared_expert_intermediate_size
    moe = model.num_moe_layers if model.num_experts else 0
    mlp = ((model.num_layers - moe) * model.intermediate_size + moe * moe_width) / max(model.num_layers, 1) / tp
    return (8 * h + rope + append + 3 * mlp) * ACT_BYTES


def kv_append_bytes_per_token(model, tp: int) -> float:
    """The new token's K/V append alone (part of `layer_bytes_per_token`): read k and v, write both;
    MLA appends its latent."""
    if model.attention == "mla":
        return 2 * (model.kv_lora_rank + model.qk_rope_head_dim) * ACT_BYTES
    return 4 * _per_gpu(model.num_kv_heads, tp) * model.head_dim * ACT_BYTES


def step_bytes_per_token(model, tp: int) -> float:
    """Glue bytes per token once per step: embedding gather, final norm, argmax over vocab / TP."""
    return (2 * model.hidden_size + 4 * model.hidden_size + model.vocab_size / tp) * ACT_BYTES
