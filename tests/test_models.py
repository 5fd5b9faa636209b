"""Model shapes: KV bytes per token by hand for every preset, parameter counts, HF config parsing."""

import pytest

from cascade_plan import InputError, load_model
from cascade_plan.cost.cost_model import kv_bytes_per_token, kv_heads_per_gpu, weight_bytes_per_gpu
from cascade_plan.cost.moe_routing import expected_experts_touched
from cascade_plan.inputs.model_presets import PRESETS
from cascade_plan.inputs.model_spec import load_preset, preset_ids

# 2 (K,V) x layers x KV heads per GPU x head dim x 2 bytes (bf16); MLA: layers x (512 + 64) x 2.
KV_BF16 = {
    ("llama-3-8b", 1): 2 * 32 * 8 * 128 * 2,          # 131,072
    ("llama-3-70b", 1): 2 * 80 * 8 * 128 * 2,         # 327,680
    ("llama-3-70b", 8): 2 * 80 * 1 * 128 * 2,         # 40,960: one KV head per GPU
    ("llama-3-70b", 16): 2 * 80 * 1 * 128 * 2,        # 8 heads < 16 ranks: replicated, still one per GPU
    ("llama-3.1-405b", 8): 2 * 126 * 1 * 128 * 2,     # 64,512
    ("codellama-13b", 1): 2 * 40 * 40 * 128 * 2,      # 819,200 (MHA)
    ("codellama-13b", 2): 2 * 40 * 20 * 128 * 2,
    ("qwen2.5-7b", 1): 2 * 28 * 4 * 128 * 2,          # 57,344
    ("mistral-7b", 1): 2 * 32 * 8 * 128 * 2,
    ("mixtral-8x7b", 1): 2 * 32 * 8 * 128 * 2,
    ("deepseek-v3", 1): 61 * (512 + 64) * 2,          # 70,272
    ("deepseek-v3", 8): 61 * (512 + 64) * 2,          # the latent is replicated on every rank
}


@pytest.mark.parametrize(("model", "tp"), list(KV_BF16))
def test_kv_bytes_per_token_by_hand(model, tp):
    assert kv_bytes_per_token(load_preset(model), "bf16", tp) == KV_BF16[(model, tp)]


def test_issue_examples():
    assert kv_bytes_per_token(load_preset("llama-3-70b"), "bf16", 8) == 40_960
    assert kv_bytes_per_token(load_preset("deepseek-v3"), "bf16", 1) == 70_272


def test_kv_dtypes():
    m = load_preset("llama-3-8b")
    assert kv_bytes_per_token(m, "fp8") == 65_536
    assert kv_bytes_per_token(m, "fp16") == 131_072
    # int8: 128 values + a 2-byte fp16 scale per (token, head, K/V) row; int4: 64 bytes + 4 (scale, zero)
    assert kv_bytes_per_token(m, "int8") == 2 * 32 * 8 * (128 + 2)
    assert kv_bytes_per_token(m, "int4") == 2 * 32 * 8 * (64 + 4)


@pytest.mark.parametrize("model", preset_ids())
def test_parameter_counts_match_published(model):
    _, _, total, active = PRESETS[model]
    spec = load_preset(model)
    assert spec.total_params == pytest.approx(total, rel=0.01)
    assert spec.active_params == pytest.approx(active, rel=0.02)


def test_llama_3_8b_exact_parameter_count():
    assert load_preset("llama-3-8b").total_params == 8_030_261_248


def test_kv_heads_replicated_when_fewer_than_ranks():
    m = load_preset("llama-3-70b")
    assert [kv_heads_per_gpu(m, tp) for tp in (1, 2, 4, 8, 16)] == [8, 4, 2, 1, 1]


def test_tiny_gqa_config_by_hand(data):
    m = load_model(str(data / "tiny-gqa-config.json"))
    assert (m.num_layers, m.num_q_heads, m.num_kv_heads, m.head_dim, m.attention) == (4, 8, 2, 32, "gqa")
    # tied embeddings: 1000x256 once; per layer q,k,v,o = 256*(8+2*2)*32 + 8*32*256, MLP 3*256*512, 2 norms
    per_layer = 256 * 12 * 32 + 8 * 32 * 256 + 3 * 256 * 512 + 2 * 256
    assert m.total_params == 1000 * 256 + 4 * per_layer + 256
    assert kv_bytes_per_token(m, "bf16") == 2 * 4 * 2 * 32 * 2


def test_tiny_mla_moe_config_by_hand(data):
    m = load_model(str(data / "tiny-mla-moe-config.json"))
    assert m.attention == "mla" and m.num_kv_heads == 1
    assert kv_bytes_per_token(m, "bf16") == 4 * (64 + 16) * 2
    assert (m.attn_qk_dim, m.attn_v_dim) == (80, 64)
    attn = (256 * 96 + 96 + 96 * 8 * 48) + (256 * 80 + 64 + 64 * 8 * 64) + 8 * 32 * 256
    expert = 3 * 256 * 64
    moe_layer = 16 * expert + expert + 256 * 16 + 16          # routed + shared + router + score bias
    total = 2 * 1000 * 256 + 4 * attn + 3 * moe_layer + 3 * 256 * 512 + 4 * 2 * 256 + 256
    assert m.total_params == total
    assert (m.num_moe_layers, m.num_experts, m.experts_per_token) == (3, 16, 2)
    assert m.active_params == total - 3 * 16 * expert + 3 * 2 * expert


def test_moe_weights_read_grow_with_batch_to_all_experts():
    m = load_preset("mixtral-8x7b")
    one = weight_bytes_per_gpu(m, "bf16", 1, 1)
    assert one == pytest.approx(m.active_params * 2)           # batch 1 reads the active experts only
    assert expected_experts_touched(m, 1) == pytest.approx(2)
    assert expected_experts_touched(m, 1000) == pytest.approx(8)
    big = weight_bytes_per_gpu(m, "bf16", 1, 1000)
    assert big == pytest.approx(m.total_params * 2)


def test_config_missing_field_names_file_and_field(data):
    with pytest.raises(InputError) as err:
        load_model(str(data / "missing-layers-config.json"))
    text = str(err.value)
    assert "missing-layers-config.json" in text and "num_hidden_layers" in text


def test_unknown_preset():
    with pytest.raises(InputError, match="unknown model 'llama-9'"):
        load_model("llama-9")


def test_config_json_syntax_error_names_file_and_line(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text('{\n  "num_hidden_layers": 4,\n  "hidden_size": 256,,\n}\n')
    with pytest.raises(InputError) as err:
        load_model(str(bad))
    assert f"{bad}:3: JSON syntax error" in str(err.value)
