"""vLLM as it runs, from hand-built steps: the backend it picks per GPU, the decision per KV-cache
group, the prefix cap, mixed and speculative batches, common blocks over every KV holder, and the
price of the lost full CUDA graph. Every expected number is worked out by hand in the comment."""

from __future__ import annotations

import dataclasses

import pytest

from cascade_plan import DEFAULT, InputError, Scenario, estimate, load_hardware, load_scenario, simple_tree
from cascade_plan.engine.attention_backend import (
    attention_backend,
    parse_attention_backend,
)
from cascade_plan.engine.engine_gate import engine_view
from cascade_plan.engine.vllm_source import EAGER_ATTENTION_PER_LAYER_S
from cascade_plan.engine.vllm_step import (
    KvCacheGroup,
    VllmStepCounts,
    count_common_prefix_blocks,
    vllm_step_decision,
)
from cascade_plan.inputs.model_spec import load_preset

# Llama-3-8B at TP 1 on a 132-SM H100/H200: Hq 32, Hkv 8 (GQA), 32 layers, 16-token blocks.
LLAMA = {"num_query_heads": 32, "num_kv_heads": 8, "num_sms": 132}


def step(requests=32, blocks=256, layers=32, **kw) -> VllmStepCounts:
    return VllmStepCounts(num_requests=requests, groups=(KvCacheGroup(blocks, layers),), **{**LLAMA, **kw})


# ---- the backend vLLM runs ------------------------------------------------------------------------

@pytest.mark.parametrize(("gpu", "name"), [("h100-sxm", "FLASH_ATTN"), ("h200", "FLASH_ATTN"),
                                           ("a100-80gb", "FLASH_ATTN"),
                                           ("l40s", "FLASH_ATTN"), ("b200", "FLASHINFER"), ("gb200", "FLASHINFER"),
                                           ("b300", "FLASHINFER"), ("mi300x", "ROCM")])
def test_default_backend_per_gpu(gpu, name):
    choice = attention_backend(load_hardware(gpu), mla=False)
    assert choice.name == name and not choice.chosen_by_user
    assert choice.can_cascade is (name == "FLASH_ATTN")


def test_mla_models_and_user_choice():
    h100 = load_hardware("h100-sxm")
    assert attention_backend(h100, mla=True).name == "MLA"
    assert attention_backend(h100, mla=True, user="FLASH_ATTN").name == "MLA"      # MLA runs MLA backends anyway
    b200 = attention_backend(load_hardware("b200"), mla=False, user="FLASH_ATTN")
    assert b200.name == "FLASH_ATTN" and b200.chosen_by_user and b200.can_cascade


@pytest.mark.parametrize(("text", "name"), [("auto", None), (None, None), ("flash_attn", "FLASH_ATTN"),
                                            ("FLASH-ATTN", "FLASH_ATTN"), ("FlashInfer", "FLASHINFER"),
                                            ("triton_attn", "TRITON_ATTN")])
def test_backend_spellings(text, name):
    assert parse_attention_backend(text) == name


def test_unknown_backend_is_one_clear_error():
    with pytest.raises(InputError, match="--attention-backend: unknown backend 'xformers'"):
        parse_attention_backend("xformers")


def _scn(hw, model="llama-3-8b"):
    return Scenario(name="t", model=load_preset(model), hardware=load_hardware(hw), kv_dtype="bf16",
                    weight_dtype="bf16", tp=1, prefix_caching=True, block_size=16, tree=simple_tree(4096, 1, 64, 128))


def test_b200_is_not_opted_in_unless_the_user_chose_flash_attention():
    est = estimate(_scn("b200"), DEFAULT)
    default = engine_view(est)
    assert default.backend.name == "FLASHINFER" and not default.opted_in.used
    assert default.opted_in.stage == "flashinfer_backend"
    assert default.opted_in.heuristic_would_use          # FlashAttention's heuristic would take it
    chosen = engine_view(est, "FLASH_ATTN")
    assert chosen.opted_in.used and chosen.backend.chosen_by_user
    assert not chosen.shipped.used                       # still disabled by default
    assert engine_view(estimate(_scn("h100-sxm"), DEFAULT)).opted_in.used


def test_mla_workload_never_cascades_in_vllm(root):
    est = estimate(load_scenario(root / "workloads/deepseek-v3-grpo-tp8.yaml"), DEFAULT)
    v = engine_view(est)
    assert v.backend.name == "MLA" and not v.opted_in.used and v.opted_in.stage == "backend_never_cascades"


# ---- CUDA graphs --------------------------------------------------------------------------------

def test_cascaded_decode_step_loses_the_full_graph():
    # 64 requests: cascade_time = ceil(32 * 1 / 132) * 32 tiles = 32 < flash-decoding ceil(64*8*32/132) = 125.
    d = vllm_step_decision(step(requests=64))
    assert d.used and d.cudagraph_mode == "PIECEWISE" and d.cudagraph_mode_without_cascade == "FULL"
    assert d.eager_attention_layers == 32
    assert d.added_s == pytest.approx(32 * 13e-6) == pytest.approx(416e-6)
    assert EAGER_ATTENTION_PER_LAYER_S == 13e-6
    assert "416 us per step" in d.reason


def test_no_cascade_keeps_the_full_graph_and_pays_nothing():
    d = vllm_step_decision(step(requests=64, blocks=8))           # 128 tokens < 256
    assert not d.used and d.cudagraph_mode == "FULL" and d.added_s == 0 and d.eager_attention_layers == 0


def test_mixed_batch_runs_piecewise_anyway():
    lens = (1,) * 63 + (100,)                                      # one prefill chunk in a decode batch
    d = vllm_step_decision(step(requests=64, query_lens=lens, min_num_computed_tokens=4096))
    assert d.used and d.cudagraph_mode == d.cudagraph_mode_without_cascade == "PIECEWISE" and d.added_s == 0


def test_steps_above_the_largest_graph_run_without_graphs():
    d = vllm_step_decision(step(requests=600))                    # 600 tokens > 512 captured
    assert d.used and d.cudagraph_mode == "NONE" and d.added_s == 0


# ---- per KV-cache group ---------------------------------------------------------------------------

def test_hybrid_model_cascades_its_full_attention_layers():
    groups = (KvCacheGroup(256, 16, "full"), KvCacheGroup(0, 16, "sliding_window", sliding_window=4096))
    d = vllm_step_decision(VllmStepCounts(num_requests=64, groups=groups, **LLAMA))
    full, sliding = d.groups
    assert d.used and full.cascade_prefix_tokens == 4096 and sliding.cascade_prefix_tokens == 0
    assert sliding.decision.stage == "sliding_window" and d.cascaded_layers == 16
    assert d.eager_attention_layers == 32                          # the whole step leaves the graph


def test_a_sliding_window_only_model_never_cascades():
    g = (KvCacheGroup(0, 32, "sliding_window", sliding_window=4096),)
    assert not vllm_step_decision(VllmStepCounts(num_requests=64, groups=g, **LLAMA)).used


# ---- the prefix cap, mixed batches, speculative decoding -----------------------------------------

@pytest.mark.parametrize(("min_computed", "prefix", "used"), [
    (None, 4096, True), (300, 288, True),            # 300 // 16 * 16 = 288 >= 256
    (271, 256, True), (255, 240, False), (0, 0, False),  # 255 -> 240 < 256; a fresh prefill without a cache hit
])
def test_prefix_capped_by_the_smallest_computed_count(min_computed, prefix, used):
    d = vllm_step_decision(step(requests=64, min_num_computed_tokens=min_computed))
    assert d.groups[0].decision.common_prefix_tokens_used == prefix and d.used is used


def test_a_prefill_chunk_turns_flash_decoding_into_cascade():
    # 16 decode requests keep flash-decoding: cascade ceil(32/132) * 32 = 32 vs ceil(16*8*32/132) = 32, a tie.
    decode = vllm_step_decision(step(requests=16))
    assert not decode.used and decode.groups[0].decision.stage == "tile_wave_flash_decoding_faster"
    mixed = vllm_step_decision(step(requests=16, query_lens=(1,) * 15 + (200,), min_num_computed_tokens=4096))
    assert mixed.used and mixed.groups[0].decision.stage == "no_flash_decoding"


def test_speculative_decoding_cascades_and_loses_the_graph_unless_async():
    spec = step(requests=16, query_lens=(4,) * 16)                  # 1 + 3 draft tokens each: uniform
    d = vllm_step_decision(spec)
    assert d.used and d.groups[0].decision.stage == "no_flash_decoding"
    assert d.cudagraph_mode_without_cascade == "FULL" and d.added_s == pytest.approx(32 * 13e-6)
    off = vllm_step_decision(dataclasses.replace(spec, async_spec_decode=True))
    assert not off.used and off.groups[0].decision.stage == "async_spec_decode"


# ---- common blocks over every request that holds KV ------------------------------------------------

def test_common_blocks_count_every_request_holding_kv():
    shared = list(range(64))                                        # 64 blocks = 1,024 tokens
    scheduled = [shared + [1000 + 10 * i, 1001 + 10 * i] for i in range(16)]
    assert count_common_prefix_blocks(scheduled) == 64
    # one running request not scheduled this step, with its own prompt: no block is held by all 17
    assert count_common_prefix_blocks(scheduled + [[5000, 5001]]) == 0
    # one sharing the first 20 blocks only: 20 blocks are common
    assert count_common_prefix_blocks(scheduled + [shared[:20] + [6000]]) == 20
    assert count_common_prefix_blocks([]) == 0
    d = vllm_step_decision(step(requests=16, blocks=count_common_prefix_blocks(scheduled + [shared[:20] + [6000]]),
                                query_lens=(1,) * 15 + (2,)))
    assert d.groups[0].decision.common_prefix_tokens_used == 320 and d.used       # 20 x 16 tokens


def test_invalid_groups_raise():
    with pytest.raises(ValueError):
        KvCacheGroup(-1)
    with pytest.raises(ValueError):
        KvCacheGroup(0, 4, "sliding_window")                        # a window is required
    with pytest.raises(ValueError):
        VllmStepCounts(num_requests=1, groups=(), **LLAMA)


def test_b200_report_says_opted_in_only_with_flash_attention(tmp_path):
    from typer.testing import CliRunner

    from cascade_plan.cli.app import app

    def summary(*extra: str) -> str:
        out = tmp_path / ("r" + "".join(extra).replace("-", "_"))
        r = CliRunner().invoke(app, ["report", "system-prompt-document-samples", "--hardware", "b200", "--no-plots",
                                     "--compare-hardware", "", "--out", str(out), *extra])
        assert r.exit_code == 0, r.output
        md = (out / "report.md").read_text()
        row = next(line for line in md.splitlines() if line.startswith("| [system-prompt-document-samples]"))
        return row.rsplit("|", 2)[1].strip(), md

    default, md = summary()
    assert default == "no / no" and "Attention backend: `FLASHINFER`" in md
    chosen, md = summary("--attention-backend", "FLASH_ATTN")
    assert chosen == "no / yes" and "loses its full CUDA graph" in md and "+416 us per step" in md
