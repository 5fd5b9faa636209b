"""Model shapes: built-in presets and Hugging Face config.json files, parsed into one typed object.

Parameter counts are computed from the shapes (gated MLP with three matrices, RMSNorm weights,
untied embeddings unless the config ties them), so a user's config.json gets the same treatment as
a preset.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from cascade_plan.errors import InputError
from cascade_plan.inputs import hf_ids
from cascade_plan.inputs.hf_config import parse_hf_config
from cascade_plan.inputs.ids import match_id, suggestion
from cascade_plan.inputs.limits import MAX_CONFIG_JSON_BYTES
from cascade_plan.inputs.model_presets import PRESETS
from cascade_plan.inputs.yaml_source import SourceDoc, check_reference, load_json


class ModelSpec(msgspec.Struct, frozen=True):
    id: str
    source: str
    num_layers: int
    hidden_size: int
    num_q_heads: int
    num_kv_heads: int          # GQA KV heads; 1 for MLA (one latent serves every query head)
    head_dim: int              # QK and V head dim for GQA
    attention: str             # "gqa" or "mla"
    kv_lora_rank: int          # MLA latent width (0 for GQA)
    qk_rope_head_dim: int      # MLA decoupled RoPE key width (0 for GQA)
    total_params: int
    embedding_params: int      # input embedding table
    expert_params_per_layer: int   # routed expert weights of one expert in one MoE layer (0 if dense)
    num_moe_layers: int
    num_experts: int
    experts_per_token: int
    sliding_window: int | None
    alibi: bool
    # GEMM shapes of the step model (cost/step_terms.py); 0 where a hand-built spec leaves them out
    intermediate_size: int = 0         # dense MLP width
    vocab_size: int = 0
    attn_in_params_per_layer: int = 0  # q, k, v projections (MLA: its down/up projections), biases included
    moe_intermediate_size: int = 0     # one routed expert's MLP width
    shared_expert_intermediate_size: int = 0

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def routed_expert_params(self) -> int:
        return self.expert_params_per_layer * self.num_experts * self.num_moe_layers

    @property
    def always_read_params(self) -> int:
        """Everything but the routed experts: attention, dense MLPs, shared experts, norms, embeddings."""
        return self.total_params - self.routed_expert_params

    @property
    def active_params(self) -> int:
        """Parameters one token uses: the shared parts plus experts_per_token experts per MoE layer."""
        return self.always_read_params + self.expert_params_per_layer * self.experts_per_token * self.num_moe_layers

    @property
    def attn_qk_dim(self) -> int:
        """Width of the query-key dot product per query head, as the decode kernel sees it
        (MLA in its absorbed form attends in latent space)."""
        return self.kv_lora_rank + self.qk_rope_head_dim if self.attention == "mla" else self.head_dim

    @property
    def attn_v_dim(self) -> int:
        return self.kv_lora_rank if self.attention == "mla" else self.head_dim


def spec_from_hf_config(cfg: dict, model_id: str, source: str) -> ModelSpec:
    """Parse the fields of a Hugging Face config.json (GQA, MLA and MoE variants); hf_config.py types
    and range-checks every field read."""
    hf = parse_hf_config(cfg)
    layers, hidden, heads = hf.num_hidden_layers, hf.hidden_size, hf.num_attention_heads
    kv_heads = hf.num_key_value_heads or heads
    vocab, inter = hf.vocab_size, hf.intermediate_size
    head_dim = hf.head_dim or hidden // heads
    model_type = hf.model_type
    tied = hf.tie_word_embeddings

    # Attention parameters per layer.
    kv_lora = hf.kv_lora_rank
    if kv_lora:
        attention = "mla"
        rope, nope, v_dim = hf.qk_rope_head_dim, hf.qk_nope_head_dim, hf.v_head_dim
        assert rope is not None and nope is not None and v_dim is not None  # parse_hf_config requires them for MLA
        q_lora = hf.q_lora_rank
        q_params = ((hidden * q_lora + q_lora + q_lora * heads * (nope + rope)) if q_lora
                    else hidden * heads * (nope + rope))
        kv_params = hidden * (kv_lora + rope) + kv_lora + kv_lora * heads * (nope + v_dim)
        attn_params = q_params + kv_params + heads * v_dim * hidden
        kv_heads_eff, rope_dim = 1, rope
    else:
        attention, kv_lora, rope_dim, kv_heads_eff = "gqa", 0, 0, kv_heads
        v_dim = head_dim  # the o projection reads heads x v_dim values (MLA: v_head_dim)
        attn_params = hidden * (heads + 2 * kv_heads) * head_dim + heads * head_dim * hidden
        if hf.attention_bias or model_type in ("qwen2", "qwen2_moe"):
            attn_params += (heads + 2 * kv_heads) * head_dim

    # MLP / MoE parameters.
    n_experts = hf.n_experts
    top_k = hf.num_experts_per_tok or 0
    moe_inter = hf.moe_intermediate_size or inter
    if n_experts:
        if not 1 <= top_k <= n_experts:
            raise InputError(f"must be between 1 and the number of experts ({n_experts})", field="num_experts_per_tok")
        first_dense = hf.first_k_dense_replace or 0
        step = hf.moe_layer_freq or hf.decoder_sparse_step or 1
        only_dense = set(hf.mlp_only_layers or [])
        moe_layer_ids = [i for i in range(layers)
                         if i >= first_dense and (i - first_dense) % step == 0 and i not in only_dense]
        n_moe = len(moe_layer_ids)
        expert = 3 * hidden * moe_inter
        shared_inter = hf.shared_expert_intermediate_size or (hf.n_shared_experts or 0) * moe_inter
        moe_layer = n_experts * expert + 3 * hidden * shared_inter + hidden * n_experts
        if hf.topk_method == "noaux_tc" or model_type == "deepseek_v3":
            moe_layer += n_experts  # router score-correction bias
        mlp_total = n_moe * moe_layer + (layers - n_moe) * 3 * hidden * inter
    else:
        n_moe, expert, mlp_total = 0, 0, layers * 3 * hidden * inter

    norms = layers * 2 * hidden + hidden
    embed = vocab * hidden
    total = embed * (1 if tied else 2) + layers * attn_params + mlp_total + norms

    window = hf.sliding_window
    if hf.use_sliding_window is False:
        window = None
    return ModelSpec(
        id=model_id, source=source, num_layers=layers, hidden_size=hidden, num_q_heads=heads,
        num_kv_heads=kv_heads_eff, head_dim=head_dim, attention=attention, kv_lora_rank=int(kv_lora or 0),
        qk_rope_head_dim=int(rope_dim), total_params=int(total), embedding_params=int(embed),
        expert_params_per_layer=int(expert), num_moe_layers=int(n_moe), num_experts=n_experts,
        experts_per_token=top_k, sliding_window=int(window) if window else None,
        alibi=bool(hf.alibi or hf.use_alibi or model_type in ("bloom",)),
        intermediate_size=int(inter), vocab_size=int(vocab),
        attn_in_params_per_layer=int(attn_params - heads * v_dim * hidden),
        moe_intermediate_size=int(moe_inter if n_experts else 0),
        shared_expert_intermediate_size=int(shared_inter if n_experts else 0),
    )


def preset_ids() -> list[str]:
    return list(PRESETS)


def load_preset(model_id: str) -> ModelSpec:
    source, cfg, _, _ = PRESETS[model_id]
    return spec_from_hf_config(cfg, model_id, source)


def load_model(ref: str, base_dir: Path | None = None) -> ModelSpec:
    """A preset id (any case), a Hugging Face repo id a preset cites or that the local HF cache holds, a path to
    a config.json, or a model folder holding one (relative to base_dir when given)."""
    check_reference(ref, "model")
    preset = match_id(ref, PRESETS) or (hf_ids.preset_for_repo(ref) if hf_ids.REPO_ID.match(ref) else None)
    if preset:
        return load_preset(preset)
    path = Path(ref).expanduser()
    if base_dir is not None and not path.is_absolute():
        path = base_dir / path
    if path.is_dir() and (path / "config.json").is_file():
        path = path / "config.json"
    elif not path.exists() and hf_ids.REPO_ID.match(ref) and not ref.endswith(".json"):
        cached = hf_ids.cached_config(ref)
        if cached is None:
            raise InputError(f"unknown model {ref!r}: no preset cites this Hugging Face repo and its config.json is "
                             f"not in the local cache ({hf_ids.hub_cache_dir()}; nothing is downloaded): fetch it with "
                             f"`huggingface-cli download {ref} config.json` or pass a path to a config.json")
        return _spec_from_file(cached, cached.parents[2].name.removeprefix("models--").replace("--", "/"))
    elif not (ref.endswith(".json") or path.exists()):
        raise InputError(f"unknown model {ref!r}{suggestion(ref, PRESETS)}: use one of {', '.join(PRESETS)}, a "
                         "Hugging Face repo id, a model folder or a path to a config.json")
    return _spec_from_file(path, path.stem if path.name != "config.json" else path.parent.name or "custom")


def _spec_from_file(path: Path, model_id: str) -> ModelSpec:
    doc: SourceDoc = load_json(path, "model config", MAX_CONFIG_JSON_BYTES)
    try:
        return spec_from_hf_config(doc.data, model_id, str(path))
    except InputError as exc:
        raise InputError(exc.message, file=str(path), field=exc.field, line=exc.line) from None
