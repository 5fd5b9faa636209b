"""Probe 1.22.0's launch rule (own_kernel_pages.wide_head_stream_tune: head dim 256's streaming launch over a bf16
cache at one program per SM, on 64-token 3-stage tiles that load page numbers an iteration ahead): golden launches
from hand arithmetic on 132 SMs, the launches it leaves alone, and invariants over many shapes."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

import kernels_probe
from cascade_plan.own_kernel_launch import ceil_div
from cascade_plan.own_kernel_pages import decode_launch, tune_at_kv_dtype, wide_head_stream_tune
from cascade_plan.own_kernel_plan import decode_launch_plan
from cascade_plan.own_kernel_tune import DEFAULT_TUNE
from cascade_plan.own_kernel_tunes import PROBE_1_21_0_TUNE

SM = 132
BF16, FP8 = tune_at_kv_dtype(DEFAULT_TUNE, "bf16"), tune_at_kv_dtype(DEFAULT_TUNE, "fp8")
BEFORE_BF16, BEFORE_FP8 = tune_at_kv_dtype(PROBE_1_21_0_TUNE, "bf16"), tune_at_kv_dtype(PROBE_1_21_0_TUNE, "fp8")


def _shape(la):
    return la.splits, la.tokens_per_split, (la.block_n, la.stages, la.warps), la.prefetch


def test_probe_1_22_0_is_1_21_0_with_head_dim_256_streaming_at_one_program_per_sm():
    assert kernels_probe.PROBE_VERSION == "1.22.0"
    assert DEFAULT_TUNE == dataclasses.replace(PROBE_1_21_0_TUNE, wide_head_stream_programs_per_sm=1)
    assert (DEFAULT_TUNE.wide_head_stream_tile_n, DEFAULT_TUNE.wide_head_stream_stages) == (64, 3)
    # over fp8 the streaming launch keeps fp8's own target
    assert FP8.wide_head_stream_programs_per_sm == 0 and FP8.stream_programs_per_sm == 4
    assert tune_at_kv_dtype(FP8, "fp8") == FP8


def test_the_oracles_row_streams_in_four_prefetching_splits():
    """8 sequences x 4 KV heads of 2 query heads at head dim 256 over 16,384 + 128 private tokens: 32 items. Before,
    the streaming launch at 2 per SM: 264 // 32 = 8 splits of 16,512 / 8 = 2,064, rounded up to whole 64-token tiles
    2,112, on the base tile, which never prefetches at head dim 256. Now 132 // 32 = 4 splits of 4,128, rounded up to
    4,160 (4 x 4,160 = 16,640 >= 16,512), on the 64-token 3-stage tile, page numbers ahead: 128 programs."""
    before = decode_launch_plan(8, 4, 2, 16512, 0, SM, BEFORE_BF16, head_dim=256)
    after = decode_launch_plan(8, 4, 2, 16512, 0, SM, BF16, head_dim=256)
    assert _shape(before) == (8, 2112, (64, 3, 4), False)
    assert _shape(after) == (4, 4160, (64, 3, 4), True)


def test_a_shared_prompt_of_at_most_half_the_context_streams_too():
    """8 sequences x 8 KV heads over a 2,048-token shared prompt + 8,192 each: 64 items, 10,240 tokens. Before, 264 //
    64 = 4 splits of 2,560; now 132 // 64 = 2 of 5,120, prefetching."""
    before = decode_launch_plan(8, 8, 2, 10240, 2048, SM, BEFORE_BF16, head_dim=256)
    after = decode_launch_plan(8, 8, 2, 10240, 2048, SM, BF16, head_dim=256)
    assert _shape(before) == (4, 2560, (64, 3, 4), False)
    assert _shape(after) == (2, 5120, (64, 3, 4), True)


def test_it_leaves_other_launches_alone():
    row = (8, 4, 2, 16512, 0, SM)
    # fp8 (fp8_stream_programs_per_sm: 4 per SM), head dim 128, the cascade's suffix pass
    assert decode_launch_plan(*row, FP8, head_dim=256) == decode_launch_plan(*row, BEFORE_FP8, head_dim=256)
    assert decode_launch_plan(*row, BF16) == decode_launch_plan(*row, BEFORE_BF16)
    assert (decode_launch(*row, BF16, head_dim=256, streaming=False)
            == decode_launch(*row, BEFORE_BF16, head_dim=256, streaming=False))
    # a shared prefix of more than half the context: the long-context launch in page blocks, not the streaming one
    shared = (8, 4, 2, 16512, 16384, SM)
    assert decode_launch_plan(*shared, BF16, head_dim=256) == decode_launch_plan(*shared, BEFORE_BF16, head_dim=256)


@settings(max_examples=300, deadline=None)
@given(batch=st.integers(1, 256), kv_heads=st.sampled_from([1, 2, 4, 8, 16]), q_per_kv=st.sampled_from([1, 2, 4, 8]),
       private=st.integers(1, 65536), shared=st.sampled_from([0, 1024, 8192]),
       kv_dtype=st.sampled_from(["bf16", "fp8"]), head_dim=st.sampled_from([128, 256]), streaming=st.booleans())
def test_only_head_dim_256s_bf16_streaming_launch_moves(batch, kv_heads, q_per_kv, private, shared, kv_dtype,
                                                        head_dim, streaming):
    tokens = shared + private
    args = (batch, kv_heads, q_per_kv, tokens, shared, SM)
    new, old = tune_at_kv_dtype(DEFAULT_TUNE, kv_dtype), tune_at_kv_dtype(PROBE_1_21_0_TUNE, kv_dtype)
    before = decode_launch_plan(*args, old, head_dim=head_dim, streaming=streaming)
    after = decode_launch_plan(*args, new, head_dim=head_dim, streaming=streaming)
    if after == before:
        return
    work = batch * kv_heads
    assert (kv_dtype, head_dim, streaming) == ("bf16", 256, True) and 2 * shared <= tokens
    # the streaming launch's split count at 1 program per SM, not 2: at most as many splits, and where the batch
    # leaves room, at most one wave
    want = max(1, min(SM // work, tokens // DEFAULT_TUNE.stream_min_tokens))
    assert after.splits == ceil_div(tokens, ceil_div(ceil_div(tokens, want), 64) * 64) <= before.splits
    assert work * after.splits <= max(SM, work)
    assert (after.block_n, after.stages, after.warps, after.prefetch, after.seqs) == (64, 3, 4, True, 1)


@settings(max_examples=100, deadline=None)
@given(work=st.integers(1, 512), tokens=st.integers(1, 200000), shared=st.sampled_from([None, 0, 1024, 100000]),
       head_dim=st.sampled_from([128, 256]))
def test_the_rule_applied_twice_gives_the_same_tune(work, tokens, shared, head_dim):
    once = wide_head_stream_tune(BF16, head_dim, shared, work, tokens, SM)
    assert wide_head_stream_tune(once, head_dim, shared, work, tokens, SM) == once
