"""Built-in models, stored as the fields of their Hugging Face config.json (the same parser reads
presets and user files, so parameter counts are computed, not typed in). Published totals are kept
beside each for the tests."""

from __future__ import annotations

# id -> (source, config fields, published total parameters, published active parameters)
PRESETS: dict[str, tuple[str, dict, float, float]] = {
    "llama-3-8b": (
        "https://huggingface.co/meta-llama/Meta-Llama-3-8B/blob/main/config.json",
        dict(model_type="llama", vocab_size=128256, hidden_size=4096, intermediate_size=14336,
             num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
             tie_word_embeddings=False, max_position_embeddings=8192),
        8.03e9, 8.03e9,
    ),
    "llama-3-70b": (
        "https://huggingface.co/meta-llama/Meta-Llama-3-70B/blob/main/config.json",
        dict(model_type="llama", vocab_size=128256, hidden_size=8192, intermediate_size=28672,
             num_hidden_layers=80, num_attention_heads=64, num_key_value_heads=8,
             tie_word_embeddings=False, max_position_embeddings=8192),
        70.6e9, 70.6e9,
    ),
    "llama-3.1-405b": (
        "https://huggingface.co/meta-llama/Llama-3.1-405B/blob/main/config.json",
        dict(model_type="llama", vocab_size=128256, hidden_size=16384, intermediate_size=53248,
             num_hidden_layers=126, num_attention_heads=128, num_key_value_heads=8,
             tie_word_embeddings=False, max_position_embeddings=131072),
        405.9e9, 405.9e9,
    ),
    "codellama-13b": (
        "https://huggingface.co/codellama/CodeLlama-13b-hf/blob/main/config.json",
        dict(model_type="llama", vocab_size=32016, hidden_size=5120, intermediate_size=13824,
             num_hidden_layers=40, num_attention_heads=40, num_key_value_heads=40,
             tie_word_embeddings=False, max_position_embeddings=16384),
        13.0e9, 13.0e9,
    ),
    "qwen2.5-7b": (
        "https://huggingface.co/Qwen/Qwen2.5-7B/blob/main/config.json",
        dict(model_type="qwen2", vocab_size=152064, hidden_size=3584, intermediate_size=18944,
             num_hidden_layers=28, num_attention_heads=28, num_key_value_heads=4,
             tie_word_embeddings=False, use_sliding_window=False, sliding_window=131072,
             max_position_embeddings=131072),
        7.61e9, 7.61e9,
    ),
    "mistral-7b": (
        "https://huggingface.co/mistralai/Mistral-7B-v0.3/blob/main/config.json",
        dict(model_type="mistral", vocab_size=32768, hidden_size=4096, intermediate_size=14336,
             num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8, head_dim=128,
             sliding_window=None, tie_word_embeddings=False, max_position_embeddings=32768),
        7.25e9, 7.25e9,
    ),
    "mixtral-8x7b": (
        "https://huggingface.co/mistralai/Mixtral-8x7B-v0.1/blob/main/config.json",
        dict(model_type="mixtral", vocab_size=32000, hidden_size=4096, intermediate_size=14336,
             num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
             num_local_experts=8, num_experts_per_tok=2, sliding_window=None,
             tie_word_embeddings=False, max_position_embeddings=32768),
        46.7e9, 12.9e9,
    ),
    "deepseek-v3": (
        "https://huggingface.co/deepseek-ai/DeepSeek-V3/blob/main/config.json",
        dict(model_type="deepseek_v3", vocab_size=129280, hidden_size=7168, intermediate_size=18432,
             moe_intermediate_size=2048, num_hidden_layers=61, num_attention_heads=128,
             num_key_value_heads=128, n_shared_experts=1, n_routed_experts=256, num_experts_per_tok=8,
             first_k_dense_replace=3, moe_layer_freq=1, q_lora_rank=1536, kv_lora_rank=512,
             qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128, tie_word_embeddings=False,
             max_position_embeddings=163840),
        # 671B total / 37B active as published, excluding the 14B multi-token-prediction module.
        671e9, 37e9,
    ),
}
