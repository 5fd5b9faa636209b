"""vLLM cascade-attention gate: cases on either side of every threshold, hand-computed."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cascade_plan.engine.vllm_gate import (
    CASCADE_DISABLED_BY_DEFAULT,
    FLASHINFER_NEVER_USES_CASCADE,
    MIN_COMMON_PREFIX_TOKENS,
    MIN_NUM_REQUESTS,
    VLLM_DEFAULT_DISABLE_CASCADE_ATTN,
    VLLM_VERSION_MODELLED,
    VllmGateInputs,
    compare_tiles_and_waves,
    engine_common_prefix_tokens,
    round_down_to_blocks,
    vllm_uses_cascade,
)

H200_SMS = 132


def opted_in(**overrides: object) -> VllmGateInputs:
    """An opted-in FlashAttention deployment whose every check passes unless overridden.

    Multi-head attention (Hq = Hkv = 32) means ordinary attention would not use flash-decoding,
    so vLLM takes cascade as soon as the gate's thresholds pass: each threshold test below then
    flips `used` by one input alone.
    """
    fields: dict[str, object] = dict(
        common_prefix_tokens=1024,
        num_requests=16,
        num_query_heads=32,
        num_kv_heads=32,
        num_sms=H200_SMS,
        disable_cascade_attn=False,
    )
    fields.update(overrides)
    return VllmGateInputs(**fields)  # type: ignore[arg-type]


def test_baseline_is_used() -> None:
    decision = vllm_uses_cascade(opted_in())
    assert decision.used
    assert decision.stage == "no_flash_decoding"
    assert decision.common_prefix_tokens_used == 1024
    assert decision.tile_wave is None and decision.cascade_time is None


# ---- prefix length threshold and rounding to whole blocks ----------------------------------------


def test_prefix_256_tokens_passes() -> None:
    decision = vllm_uses_cascade(opted_in(common_prefix_tokens=256))
    assert decision.used
    assert decision.common_prefix_tokens_used == 256


def test_prefix_255_tokens_fails() -> None:
    # 255 tokens = 15 whole 16-token blocks (240 tokens) + 15 tokens in a private partial block.
    decision = vllm_uses_cascade(opted_in(common_prefix_tokens=255))
    assert not decision.used
    assert decision.stage == "prefix_too_short"
    assert decision.common_prefix_tokens_used == 240
    assert str(MIN_COMMON_PREFIX_TOKENS) in decision.reason


def test_prefix_255_fails_even_with_one_token_blocks() -> None:
    # block_size 1 removes the rounding: the raw 256-token threshold alone decides.
    assert not vllm_uses_cascade(opted_in(common_prefix_tokens=255, block_size=1)).used
    assert vllm_uses_cascade(opted_in(common_prefix_tokens=256, block_size=1)).used


@pytest.mark.parametrize(
    ("shared_tokens", "block_size", "expected_tokens", "expected_used"),
    [
        (270, 16, 256, True),  # 16 whole blocks, 14 tokens left over
        (260, 16, 256, True),  # 16 whole blocks, 4 left over
        (250, 16, 240, False),  # 15 whole blocks: under 256
        (271, 16, 256, True),
        (272, 16, 272, True),  # exactly 17 blocks
        (270, 32, 256, True),  # 8 blocks of 32
        (280, 32, 256, True),
        (287, 32, 256, True),
        (250, 32, 224, False),  # 7 blocks of 32
        (300, 128, 256, True),  # 2 blocks of 128
        (383, 128, 256, True),
        (255, 128, 128, False),  # 1 block of 128
        (15, 16, 0, False),  # less than one block: nothing shared
    ],
)
def test_rounding_down_to_whole_blocks(
    shared_tokens: int, block_size: int, expected_tokens: int, expected_used: bool
) -> None:
    decision = vllm_uses_cascade(
        opted_in(common_prefix_tokens=shared_tokens, block_size=block_size)
    )
    assert decision.common_prefix_tokens_used == expected_tokens
    assert decision.used is expected_used


def test_prefix_capped_by_min_computed_tokens_then_rounded() -> None:
    # 1024 shared tokens, but one request has only 300 computed: min(1024, 300) = 300, then
    # rounded down to 18 blocks of 16 = 288 tokens.
    decision = vllm_uses_cascade(opted_in(min_num_computed_tokens=300))
    assert decision.common_prefix_tokens_used == 288
    assert decision.used
    # A cap of 270 gives 256 (still enough), 255 gives 240 (too short).
    assert vllm_uses_cascade(opted_in(min_num_computed_tokens=270)).used
    capped = vllm_uses_cascade(opted_in(min_num_computed_tokens=255))
    assert not capped.used and capped.common_prefix_tokens_used == 240


def test_round_down_to_blocks() -> None:
    assert round_down_to_blocks(270, 16) == 256
    assert round_down_to_blocks(0, 16) == 0
    assert round_down_to_blocks(16, 16) == 16
    with pytest.raises(ValueError):
        round_down_to_blocks(10, 0)


# ---- request count threshold ---------------------------------------------------------------------


def test_eight_requests_pass() -> None:
    decision = vllm_uses_cascade(opted_in(num_requests=8))
    assert decision.used


def test_seven_requests_fail() -> None:
    decision = vllm_uses_cascade(opted_in(num_requests=7))
    assert not decision.used
    assert decision.stage == "too_few_requests"
    assert str(MIN_NUM_REQUESTS) in decision.reason


# ---- unsupported variants ------------------------------------------------------------------------


def test_sliding_window_off_vs_on() -> None:
    assert vllm_uses_cascade(opted_in(sliding_window=None)).used
    decision = vllm_uses_cascade(opted_in(sliding_window=4096))
    assert not decision.used
    assert decision.stage == "sliding_window"
    # The sliding-window KV manager reports no shared blocks at all.
    assert decision.common_prefix_tokens_used == 0


def test_alibi_off_vs_on() -> None:
    assert vllm_uses_cascade(opted_in(use_alibi=False)).used
    decision = vllm_uses_cascade(opted_in(use_alibi=True))
    assert not decision.used
    assert decision.stage == "alibi"
    assert decision.common_prefix_tokens_used == 1024


def test_alibi_with_short_prefix_reports_the_prefix_first() -> None:
    # The source checks the prefix length before the unsupported variants.
    decision = vllm_uses_cascade(opted_in(use_alibi=True, common_prefix_tokens=100))
    assert decision.stage == "prefix_too_short"


def test_local_attention_off_vs_on() -> None:
    assert vllm_uses_cascade(opted_in(use_local_attention=False)).used
    decision = vllm_uses_cascade(opted_in(use_local_attention=True))
    assert not decision.used and decision.stage == "local_attention"


def test_decode_context_parallel_1_vs_2() -> None:
    assert vllm_uses_cascade(opted_in(dcp_world_size=1)).used
    decision = vllm_uses_cascade(opted_in(dcp_world_size=2))
    assert not decision.used and decision.stage == "decode_context_parallel"


def test_prefix_caching_off_shares_nothing() -> None:
    decision = vllm_uses_cascade(opted_in(prefix_caching_enabled=False))
    assert not decision.used
    assert decision.stage == "no_prefix_caching"
    assert decision.common_prefix_tokens_used == 0


# ---- tile/wave comparison (GQA decode, where flash-decoding competes) ----------------------------


def llama3_8b_decode(num_requests: int, prefix_tokens: int = 1024) -> VllmGateInputs:
    # Llama-3-8B at TP 1: Hq 32, Hkv 8, G = 4; H200 has 132 SMs.
    return VllmGateInputs(
        common_prefix_tokens=prefix_tokens,
        num_requests=num_requests,
        num_query_heads=32,
        num_kv_heads=8,
        num_sms=H200_SMS,
        disable_cascade_attn=False,
    )


def test_flash_decoding_wins_at_8_requests() -> None:
    # prefix 1024 -> ceil(1024/128) = 8 KV tiles.
    # cascade: CTAs = 32 * ceil(8/128) = 32; waves = ceil(32/132) = 1; time = 1 * 8 = 8.
    # flash-decoding: CTAs = 8 req * 8 kv heads * ceil(4/128) * 8 tiles = 512;
    #                 time = ceil(512/132) = 4   (3*132 = 396 < 512 <= 528 = 4*132).
    # 8 < 4 is false -> flash-decoding kept.
    decision = vllm_uses_cascade(llama3_8b_decode(8))
    assert not decision.used
    assert decision.stage == "tile_wave_flash_decoding_faster"
    tw = decision.tile_wave
    assert tw is not None
    assert (tw.num_prefix_tiles, tw.cascade_ctas, tw.cascade_waves) == (8, 32, 1)
    assert (decision.cascade_time, tw.flash_decoding_ctas, decision.flash_decoding_time) == (
        8,
        512,
        4,
    )


def test_cascade_wins_at_32_requests() -> None:
    # cascade: CTAs = 32 * ceil(32/128) = 32; waves = 1; time = 8.
    # flash-decoding: CTAs = 32 * 8 * 1 * 8 = 2048; time = ceil(2048/132) = 16
    #                 (15*132 = 1980 < 2048 <= 2112 = 16*132).
    # 8 < 16 -> cascade.
    decision = vllm_uses_cascade(llama3_8b_decode(32))
    assert decision.used
    assert decision.stage == "tile_wave_cascade_faster"
    assert (decision.cascade_time, decision.flash_decoding_time) == (8, 16)
    assert decision.tile_wave is not None and decision.tile_wave.flash_decoding_ctas == 2048


def test_tile_wave_boundary_16_vs_17_requests() -> None:
    # With one cascade wave the rule reduces to num_reqs * Hkv > num_sms: 16*8 = 128 <= 132 (no),
    # 17*8 = 136 > 132 (yes). At prefix 256 (2 tiles):
    #   16 req: cascade 1*2 = 2; flash-decoding ceil(16*8*2/132) = ceil(256/132) = 2 -> tie, kept.
    #   17 req: cascade 2;       flash-decoding ceil(17*8*2/132) = ceil(272/132) = 3 -> cascade.
    at_16 = vllm_uses_cascade(llama3_8b_decode(16, prefix_tokens=256))
    at_17 = vllm_uses_cascade(llama3_8b_decode(17, prefix_tokens=256))
    assert (at_16.cascade_time, at_16.flash_decoding_time, at_16.used) == (2, 2, False)
    assert (at_17.cascade_time, at_17.flash_decoding_time, at_17.used) == (2, 3, True)


def test_odd_prefix_tiles_and_many_requests() -> None:
    # 300 shared tokens -> 288 in whole blocks -> ceil(288/128) = 3 tiles.
    # 200 requests: cascade CTAs = 32 * ceil(200/128) = 64, waves = 1, time = 3.
    # flash-decoding CTAs = 200 * 8 * 1 * 3 = 4800, time = ceil(4800/132) = 37 (36*132 = 4752).
    decision = vllm_uses_cascade(llama3_8b_decode(200, prefix_tokens=300))
    assert decision.common_prefix_tokens_used == 288
    assert decision.tile_wave is not None
    assert decision.tile_wave.cascade_ctas == 64
    assert (decision.cascade_time, decision.flash_decoding_time) == (3, 37)
    assert decision.used


def test_few_sms_lets_cascade_win_at_8_requests() -> None:
    # On a 32-SM part: cascade CTAs 32 -> 1 wave -> time 8 (prefix 1024);
    # flash-decoding ceil(512/32) = 16 -> cascade.
    decision = vllm_uses_cascade(dataclasses.replace(llama3_8b_decode(8), num_sms=32))
    assert (decision.cascade_time, decision.flash_decoding_time, decision.used) == (8, 16, True)


def test_prefill_query_lens_skip_the_tile_wave_model() -> None:
    # Same shape as the flash-decoding win above, but one request brings 5 tokens (chunked
    # prefill / speculative tokens): flash-decoding is off, so vLLM takes cascade directly.
    lens = (1,) * 7 + (5,)
    decision = vllm_uses_cascade(dataclasses.replace(llama3_8b_decode(8), query_lens=lens))
    assert decision.used
    assert decision.stage == "no_flash_decoding"
    assert decision.tile_wave is None


def test_explicit_decode_query_lens_equal_default() -> None:
    explicit = dataclasses.replace(llama3_8b_decode(32), query_lens=(1,) * 32)
    assert vllm_uses_cascade(explicit) == vllm_uses_cascade(llama3_8b_decode(32))


def test_compare_tiles_and_waves_direct() -> None:
    tw = compare_tiles_and_waves(1024, 32, 32, 8, H200_SMS)
    assert (tw.cascade_time, tw.flash_decoding_time, tw.cascade_faster) == (8, 16, True)


# ---- engine switches -----------------------------------------------------------------------------


def test_disabled_by_default() -> None:
    assert VLLM_DEFAULT_DISABLE_CASCADE_ATTN is True
    stock = dataclasses.replace(opted_in(), disable_cascade_attn=VLLM_DEFAULT_DISABLE_CASCADE_ATTN)
    plain = VllmGateInputs(
        common_prefix_tokens=1024,
        num_requests=16,
        num_query_heads=32,
        num_kv_heads=32,
        num_sms=H200_SMS,
    )
    assert plain == stock
    decision = vllm_uses_cascade(plain)
    assert not decision.used
    assert decision.stage == "disabled_by_config"
    # The heuristic's own verdict is kept for the "would it pay to opt in?" question.
    assert decision.heuristic_would_use
    assert "--no-disable-cascade-attn" in decision.reason


def test_flashinfer_never_uses_cascade() -> None:
    decision = vllm_uses_cascade(opted_in(attention_backend="FLASHINFER"))
    assert not decision.used
    assert decision.stage == "flashinfer_backend"
    assert decision.heuristic_would_use


def test_micro_batching_skips_cascade() -> None:
    decision = vllm_uses_cascade(opted_in(use_ubatching=True))
    assert not decision.used and decision.stage == "micro_batching"


def test_switch_reason_reports_heuristic_no() -> None:
    decision = vllm_uses_cascade(opted_in(num_requests=7, disable_cascade_attn=True))
    assert not decision.heuristic_would_use
    assert "would still not use it" in decision.reason
    assert decision.heuristic_reason.startswith("Not used: 7 requests")


def test_notes_are_present() -> None:
    assert "PR #36318" in CASCADE_DISABLED_BY_DEFAULT
    assert "FlashInfer" in FLASHINFER_NEVER_USES_CASCADE
    assert "5704f34f361c6c59a9c092c4e1e96730cc6dc14d" in VLLM_VERSION_MODELLED


# ---- input validation ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "overrides",
    [
        {"common_prefix_tokens": -1},
        {"num_requests": 0},
        {"num_kv_heads": 0},
        {"num_kv_heads": 64},  # more KV heads than query heads
        {"num_sms": 0},
        {"block_size": 0},
        {"dcp_world_size": 0},
        {"sliding_window": 0},
        {"min_num_computed_tokens": -5},
        {"query_lens": (1, 1)},  # length differs from num_requests (16)
        {"query_lens": (0,) * 16},
        {"attention_backend": ""},
    ],
)
def test_invalid_inputs_raise(overrides: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        opted_in(**overrides)


# ---- invariants ----------------------------------------------------------------------------------

gqa_decode = st.tuples(
    st.integers(min_value=MIN_NUM_REQUESTS, max_value=1024),  # requests
    st.sampled_from([1, 2, 4, 8, 16]),  # KV heads per GPU
    st.sampled_from([2, 4, 8, 16]),  # group size G = Hq / Hkv (> 1: flash-decoding competes)
    st.sampled_from([16, 32, 58, 108, 132, 144]),  # SMs
    st.integers(min_value=MIN_COMMON_PREFIX_TOKENS, max_value=1 << 17),  # prefix A
    st.integers(min_value=MIN_COMMON_PREFIX_TOKENS, max_value=1 << 17),  # prefix B
)


@given(gqa_decode)
def test_tile_wave_verdict_does_not_depend_on_prefix_length(
    case: tuple[int, int, int, int, int, int],
) -> None:
    # cascade_time = W * P is a multiple of the tile count P, and flash_decoding_time =
    # ceil(F * P / S), so W * P < ceil(F * P / S) holds exactly when F > W * S: P cancels.
    num_requests, num_kv_heads, group, num_sms, prefix_a, prefix_b = case
    num_query_heads = num_kv_heads * group

    def decide(prefix: int) -> bool:
        return vllm_uses_cascade(
            VllmGateInputs(
                common_prefix_tokens=prefix,
                num_requests=num_requests,
                num_query_heads=num_query_heads,
                num_kv_heads=num_kv_heads,
                num_sms=num_sms,
                disable_cascade_attn=False,
            )
        ).used

    cascade_waves = -(-(num_query_heads * -(-num_requests // 128)) // num_sms)
    fd_ctas_per_tile = num_requests * num_kv_heads * -(-group // 128)
    closed_form = fd_ctas_per_tile > cascade_waves * num_sms
    assert decide(prefix_a) == decide(prefix_b) == closed_form


@given(
    st.integers(min_value=0, max_value=4096),
    st.sampled_from([1, 16, 32, 64, 128]),
    st.integers(min_value=1, max_value=64),
)
def test_used_implies_every_threshold_met(prefix: int, block_size: int, num_requests: int) -> None:
    inputs = opted_in(
        common_prefix_tokens=prefix, block_size=block_size, num_requests=num_requests
    )
    decision = vllm_uses_cascade(inputs)
    assert decision.common_prefix_tokens_used % block_size == 0
    assert decision.common_prefix_tokens_used <= prefix
    assert prefix - decision.common_prefix_tokens_used < block_size
    if decision.used:
        assert decision.common_prefix_tokens_used >= MIN_COMMON_PREFIX_TOKENS
        assert num_requests >= MIN_NUM_REQUESTS
    assert engine_common_prefix_tokens(inputs) == decision.common_prefix_tokens_used
