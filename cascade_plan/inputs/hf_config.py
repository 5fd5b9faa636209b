"""The fields of a Hugging Face config.json that cascade-plan reads, as a typed schema.

A config has many more fields than these; unknown ones are ignored (they describe training, tokenizer,
RoPE scaling...). Every field read is typed and range-checked here, so a string where a number belongs,
a negative or zero dimension, or a shape that divides to nothing is one clear error, never a
traceback or a negative byte count downstream."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from cascade_plan.errors import InputError
from cascade_plan.inputs import limits

# Written out (not built by a helper function) so a type checker reads them as the int aliases they are.
Layers = Annotated[int, msgspec.Meta(ge=1, le=limits.MAX_LAYERS)]
Hidden = Annotated[int, msgspec.Meta(ge=1, le=limits.MAX_HIDDEN)]
Heads = Annotated[int, msgspec.Meta(ge=1, le=limits.MAX_HEADS)]
HeadDim = Annotated[int, msgspec.Meta(ge=1, le=limits.MAX_HEAD_DIM)]
Width = Annotated[int, msgspec.Meta(ge=1, le=limits.MAX_INTERMEDIATE)]
Experts = Annotated[int, msgspec.Meta(ge=0, le=limits.MAX_EXPERTS)]
Vocab = Annotated[int, msgspec.Meta(ge=1, le=limits.MAX_VOCAB)]
LayerIndex = Annotated[int, msgspec.Meta(ge=0, le=limits.MAX_LAYERS)]
WidthOrZero = Annotated[int, msgspec.Meta(ge=0, le=limits.MAX_INTERMEDIATE)]
Window = Annotated[int, msgspec.Meta(ge=1, le=limits.MAX_CONTEXT_TOKENS)]


class HfConfig(msgspec.Struct, frozen=True, kw_only=True):
    """config.json fields (None where a config writes null or leaves a field out)."""

    num_hidden_layers: Layers
    hidden_size: Hidden
    num_attention_heads: Heads
    vocab_size: Vocab
    intermediate_size: Width
    num_key_value_heads: Heads | None = None
    head_dim: HeadDim | None = None
    model_type: str = ""
    tie_word_embeddings: bool = False
    attention_bias: bool = False
    # MLA (DeepSeek V2/V3)
    kv_lora_rank: HeadDim | None = None
    q_lora_rank: Width | None = None
    qk_rope_head_dim: HeadDim | None = None
    qk_nope_head_dim: HeadDim | None = None
    v_head_dim: HeadDim | None = None
    # MoE
    num_local_experts: Experts | None = None
    n_routed_experts: Experts | None = None
    num_experts: Experts | None = None
    num_experts_per_tok: Experts | None = None
    moe_intermediate_size: Width | None = None
    first_k_dense_replace: LayerIndex | None = None
    moe_layer_freq: Layers | None = None
    decoder_sparse_step: Layers | None = None
    mlp_only_layers: list[LayerIndex] | None = None
    shared_expert_intermediate_size: WidthOrZero | None = None
    n_shared_experts: Experts | None = None
    topk_method: str | None = None
    # attention variants the engines treat differently
    sliding_window: Window | None = None
    use_sliding_window: bool | None = None
    alibi: bool | None = None
    use_alibi: bool | None = None

    @property
    def n_experts(self) -> int:
        return self.num_local_experts or self.n_routed_experts or self.num_experts or 0


def parse_hf_config(cfg: Any) -> HfConfig:
    """The typed fields of a config.json mapping (multimodal wrappers keep the LM in `text_config`)."""
    if isinstance(cfg, dict) and isinstance(cfg.get("text_config"), dict):
        cfg = {**cfg["text_config"], "model_type": cfg["text_config"].get("model_type", cfg.get("model_type"))}
    try:
        hf = msgspec.convert(cfg, HfConfig)
    except msgspec.ValidationError as exc:
        msg, _, where = str(exc).partition(" - at `$.")
        field = where.rstrip("`") or None
        if msg.startswith("Object missing required field"):
            field, msg = msg.split("`")[1], "required field is missing in the model config"
        raise InputError(msg.replace("`", ""), field=field) from None
    heads, kv = hf.num_attention_heads, hf.num_key_value_heads or hf.num_attention_heads
    if heads % kv:
        raise InputError(f"num_attention_heads ({heads}) must be a multiple of num_key_value_heads ({kv})",
                         field="num_key_value_heads")
    if hf.head_dim is None and hf.hidden_size < heads:
        raise InputError(f"hidden_size ({hf.hidden_size}) is smaller than num_attention_heads ({heads}): the head "
                         "dimension would be 0; give head_dim", field="hidden_size")
    if hf.kv_lora_rank:
        missing = [f for f in ("qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim") if getattr(hf, f) is None]
        if missing:
            raise InputError("required field is missing in the model config (MLA: kv_lora_rank is set)",
                             field=missing[0])
    return hf
