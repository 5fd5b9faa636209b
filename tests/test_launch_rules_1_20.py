"""Probe 1.20.0's launch rule (own_kernel_pages.wide_head_waves over short-tile launches too, kept by
own_kernel_plan.wave_short_launch where probe 1.19.0's launch runs the short tile): golden launches from hand
arithmetic on 132 SMs, the launches it leaves alone, and an invariant over many shapes."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from cascade_plan.own_kernel_launch import ceil_div
from cascade_plan.own_kernel_pages import decode_launch
from cascade_plan.own_kernel_plan import decode_launch_plan
from cascade_plan.own_kernel_tune import DEFAULT_TUNE
from cascade_plan.own_kernel_tunes import PROBE_1_19_0_TUNE, PROBE_1_20_0_TUNE

SM = 132
BEFORE = PROBE_1_19_0_TUNE


def _shape(la):
    return la.splits, la.tokens_per_split, (la.block_n, la.stages, la.warps), la.seqs


def test_probe_1_20_0_is_1_19_0_with_waves_on_short_tiles():
    assert PROBE_1_20_0_TUNE == dataclasses.replace(BEFORE, wide_head_wave_short=True)


def test_a_short_tile_launch_at_head_dim_256_fills_one_wave():
    """8 sequences x 4 KV heads of 2 query heads at head dim 256 over 1,024 + 128 private tokens: 32 items. Before,
    9 short splits of 128 tokens: 288 programs, two waves of 264 (2 per SM), 2 x (128 + 64) = 384 token-waves. Now 6
    splits of 192, still the short tile (at most 256 tokens): 192 programs, one wave, 192 + 64 = 256 (5 of 256: 320;
    4 of 320: 384; one of 1,152: 1,216)."""
    before = decode_launch_plan(8, 4, 2, 1152, 0, SM, BEFORE, head_dim=256)
    after = decode_launch_plan(8, 4, 2, 1152, 0, SM, DEFAULT_TUNE, head_dim=256)
    assert _shape(before) == (9, 128, (64, 2, 4), 1)
    assert _shape(after) == (6, 192, (64, 2, 4), 1)


def test_it_can_move_a_short_tile_launch_onto_the_base_tile():
    """4 sequences x 8 KV heads of one query head at 2,048 + 128: 12 short splits of 192 (384 programs, two waves:
    2 x 256 = 512) become 7 of 320 on the base tile (224 programs, one wave: 384)."""
    before = decode_launch_plan(4, 8, 1, 2176, 0, SM, BEFORE, head_dim=256)
    after = decode_launch_plan(4, 8, 1, 2176, 0, SM, DEFAULT_TUNE, head_dim=256)
    assert _shape(before) == (12, 192, (64, 2, 4), 1)
    assert _shape(after) == (7, 320, (64, 3, 4), 1)


def test_a_launch_a_later_rule_moves_onto_the_base_tile_stays_as_probe_1_19_0_made_it():
    """4 sequences x 16 KV heads of one query head at 2,176 + 128 private tokens: the split target gives 9 short splits
    of 256 (576 programs), which one split fewer over private pages (floored_splits_launch: 512 programs, 3.9 per SM)
    turns into 8 of 320 on the base tile. Waved first, the short launch would become 4 of 576 (256 programs, one
    wave); that has not been timed against the floored launch, so 8 x 320 stays."""
    before = decode_launch_plan(4, 16, 1, 2304, 0, SM, BEFORE, head_dim=256)
    after = decode_launch_plan(4, 16, 1, 2304, 0, SM, DEFAULT_TUNE, head_dim=256)
    assert _shape(before) == _shape(after) == (8, 320, (64, 3, 4), 1)
    unchecked = dataclasses.replace(DEFAULT_TUNE, floor_splits_min_programs_per_sm=0.0)
    assert decode_launch(4, 16, 1, 2304, 0, SM, unchecked, head_dim=256)[:2] == (4, 576)
    # the wave-floor stage's variant (off) launches it
    floored = dataclasses.replace(DEFAULT_TUNE, wide_head_wave_short_floored=True)
    assert _shape(decode_launch_plan(4, 16, 1, 2304, 0, SM, floored, head_dim=256)) == (4, 576, (64, 3, 4), 1)


def test_it_leaves_other_launches_alone():
    # head dim 128 has no wave rule
    assert decode_launch_plan(8, 4, 2, 1152, 0, SM, DEFAULT_TUNE) == decode_launch_plan(8, 4, 2, 1152, 0, SM, BEFORE)
    # the cascade's suffix pass shares the GPU with the prefix pass: no wave of its own
    assert (decode_launch(8, 4, 2, 1152, 0, SM, DEFAULT_TUNE, head_dim=256, streaming=False)
            == decode_launch(8, 4, 2, 1152, 0, SM, BEFORE, head_dim=256, streaming=False))
    # a launch that forms page blocks over a shared prefix keeps them
    blocks = decode_launch_plan(64, 4, 2, 1152, 1024, SM, DEFAULT_TUNE, head_dim=256)
    assert blocks == decode_launch_plan(64, 4, 2, 1152, 1024, SM, BEFORE, head_dim=256)


def _token_waves(la, work_items):
    """wave_splits' cost of a launch: waves of 2 resident programs per SM, each a split's tokens plus one tile."""
    return ceil_div(work_items * la.splits, 2 * SM) * (la.tokens_per_split + la.block_n)


@settings(max_examples=300, deadline=None)
@given(batch=st.integers(1, 64), kv_heads=st.sampled_from([1, 2, 4, 8, 16]), q_per_kv=st.sampled_from([1, 2, 4, 8]),
       tokens=st.integers(1, 64).map(lambda t: 64 * t + 128))
def test_where_it_changes_a_launch_the_model_counts_no_more_token_waves(batch, kv_heads, q_per_kv, tokens):
    before = decode_launch_plan(batch, kv_heads, q_per_kv, tokens, 0, SM, BEFORE, head_dim=256)
    # the rule alone: probe 1.22.0's streaming launch at head dim 256 moves other launches (test_launch_rules_1_22)
    after = decode_launch_plan(batch, kv_heads, q_per_kv, tokens, 0, SM, PROBE_1_20_0_TUNE, head_dim=256)
    if after == before:
        return
    work = batch * kv_heads
    assert _token_waves(after, work) <= _token_waves(before, work)
    # only where probe 1.19.0's launch runs the short tile (its base-tile launches were already waved)
    assert before.tokens_per_split <= DEFAULT_TUNE.decode_short_tokens and before.block_n == after.block_n == 64
    assert after.seqs == before.seqs == 1 and not after.long_tile
