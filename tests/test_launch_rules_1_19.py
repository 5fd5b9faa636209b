"""Probe 1.19.0's four launch rules (own_kernel_plan, own_kernel_pages.tune_at_kv_dtype): golden launches from hand
arithmetic on 132 SMs, the launches each leaves alone, and invariants over many shapes."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from cascade_plan.own_kernel_launch import tile_of
from cascade_plan.own_kernel_pages import tune_at_kv_dtype
from cascade_plan.own_kernel_plan import decode_launch_plan
from cascade_plan.own_kernel_tune import DEFAULT_TUNE
from cascade_plan.own_kernel_tunes import PROBE_1_18_0_TUNE, PROBE_1_19_0_TUNE

SM = 132
BEFORE = PROBE_1_18_0_TUNE


def _shape(la):
    return la.splits, la.tokens_per_split, (la.block_n, la.stages, la.warps), la.prefetch, la.seqs


def test_probe_1_19_0_is_1_18_0_with_four_rules():
    assert PROBE_1_19_0_TUNE == dataclasses.replace(
        BEFORE, floor_splits_private_min_programs_per_sm=2.0, few_programs_tile_max_programs_per_sm=1.25,
        wide_dot_four_fewer_max_private_tokens=256, fp8_private_filled_base_tile=True)


def test_page_blocks_of_about_one_program_per_sm_run_the_128_token_tile():
    """8 sequences x 8 KV heads at 4,096 shared + 128 tokens, 4 query heads per KV head: 9 splits of 512 in blocks of
    four leave 64 x 9 / 4 = 144 working programs, 1.09 per SM (< 1.25): the same 9 x 512 on the 128-token tile of
    two stages and four warps, page numbers an iteration ahead, still in blocks of four."""
    before = decode_launch_plan(8, 8, 4, 4224, 4096, SM, BEFORE)
    after = decode_launch_plan(8, 8, 4, 4224, 4096, SM, DEFAULT_TUNE)
    assert _shape(before) == (9, 512, (64, 3, 2), False, 4)
    assert _shape(after) == (9, 512, (128, 2, 4), True, 4)


def test_the_128_token_tile_leaves_other_launches_alone():
    # 64 x 8 at 1,024 + 128 in 2 splits and blocks of four: 256 working programs, 1.94 per SM
    assert decode_launch_plan(64, 8, 4, 1152, 1024, SM, DEFAULT_TUNE).block_n == 64
    # private pages: no blocks (the private-pages split rule gives 8 splits, one fewer than 9, on the base tile)
    private = decode_launch_plan(8, 8, 4, 4224, 0, SM, DEFAULT_TUNE)
    assert (private.block_n, private.seqs) == (64, 1)
    # head dim 256 has its own tiles
    wide = decode_launch_plan(8, 8, 4, 4224, 4096, SM, DEFAULT_TUNE, head_dim=256)
    assert wide == decode_launch_plan(8, 8, 4, 4224, 4096, SM, BEFORE, head_dim=256)


def test_the_wide_dots_blocks_of_four_take_one_split_fewer():
    """128 sequences x 2 KV heads at 4,096 + 128, 16 query heads per KV head: blocks of four in the wide dot on the
    64-token long-context tile in 5 splits (256 x 5 / 4 = 320 working programs); 4 splits of 1,088 leave 256, 1.94
    per SM >= 1.8. At 2,048 + 128, 4 splits of 576 stay: 3 would leave 192, 1.45 per SM."""
    before = decode_launch_plan(128, 2, 16, 4224, 4096, SM, BEFORE)
    after = decode_launch_plan(128, 2, 16, 4224, 4096, SM, DEFAULT_TUNE)
    assert _shape(before) == (5, 896, (64, 2, 4), True, 4) and before.long_tile
    assert _shape(after) == (4, 1088, (64, 2, 4), True, 4) and after.long_tile
    short = decode_launch_plan(128, 2, 16, 2176, 2048, SM, DEFAULT_TUNE)
    assert short == decode_launch_plan(128, 2, 16, 2176, 2048, SM, BEFORE) and short.splits == 4


def test_private_pages_take_one_split_fewer_down_to_two_programs_per_sm():
    """8 sequences x 40 KV heads at 1,024 + 128 private tokens: 320 items want 528 / 320 = 1.65 splits and get 2;
    unsplit leaves 320 programs, 2.4 per SM: under 3.5 (shared pages' floor), over 2.0 (private pages')."""
    before = decode_launch_plan(8, 40, 1, 1152, 0, SM, BEFORE)
    after = decode_launch_plan(8, 40, 1, 1152, 0, SM, DEFAULT_TUNE)
    assert (before.splits, before.tokens_per_split) == (2, 576)
    assert (after.splits, after.tokens_per_split, after.seqs) == (1, 1152, 1)
    # over shared pages the split stays (the tile rule above changes its tile, not its splits)
    assert decode_launch_plan(8, 40, 1, 1152, 1024, SM, DEFAULT_TUNE).splits == 2
    # over fp8 too (tune_at_kv_dtype): 320 < 3.5 x 132, the floor over shared pages and over fp8
    assert decode_launch_plan(8, 40, 1, 1152, 0, SM, tune_at_kv_dtype(DEFAULT_TUNE, "fp8")).splits == 2
    assert decode_launch_plan(8, 40, 1, 1152, 0, SM, tune_at_kv_dtype(DEFAULT_TUNE, "bf16")).splits == 1


def test_fp8_batch_filled_launches_over_private_pages_run_the_base_tile():
    """64 sequences x 40 KV heads at 4,096 + 128 (2,560 items, unsplit on the batch-filled tile): over fp8 and
    private pages on the 64-token base tile instead, page numbers still an iteration ahead; bf16, and fp8 over shared
    pages, keep the 128-token tile."""
    fp8, bf16 = tune_at_kv_dtype(DEFAULT_TUNE, "fp8"), tune_at_kv_dtype(DEFAULT_TUNE, "bf16")
    assert fp8.private_filled_base_tile and not bf16.private_filled_base_tile
    assert tune_at_kv_dtype(fp8, "fp8") == fp8 and not tune_at_kv_dtype(fp8, "bf16").private_filled_base_tile
    private = decode_launch_plan(64, 40, 1, 4224, 0, SM, fp8)
    assert _shape(private) == (1, 4224, tile_of("base", DEFAULT_TUNE), True, 1)
    assert decode_launch_plan(64, 40, 1, 4224, 4096, SM, fp8).block_n == 128
    assert decode_launch_plan(64, 40, 1, 4224, 0, SM, bf16).block_n == 128
    assert decode_launch_plan(64, 40, 1, 4224, 0, SM, tune_at_kv_dtype(BEFORE, "fp8")).block_n == 128


@settings(max_examples=300, deadline=None)
@given(batch=st.integers(1, 256), kv_heads=st.sampled_from([1, 2, 4, 8, 16, 40]),
       q_per_kv=st.sampled_from([1, 2, 3, 4, 5, 6, 7, 8, 12, 16]), prefix=st.integers(64, 16384),
       suffix=st.integers(0, 2048), head_dim=st.sampled_from([64, 128]))
def test_what_the_shared_page_rules_change(batch, kv_heads, q_per_kv, prefix, suffix, head_dim):
    """Over shared pages a changed launch either runs the 128-token four-warp tile in the same splits, in blocks no
    smaller, where the old launch left < 1.25 working programs per SM, or (the wide dot) takes fewer splits in blocks
    of four that leave >= 1.8 per SM."""
    seq = prefix + suffix
    a = decode_launch_plan(batch, kv_heads, q_per_kv, seq, prefix, SM, BEFORE, head_dim=head_dim)
    b = decode_launch_plan(batch, kv_heads, q_per_kv, seq, prefix, SM, DEFAULT_TUNE, head_dim=head_dim)
    if a == b:
        return
    work = batch * kv_heads
    if b.splits == a.splits:
        assert (b.block_n, b.warps, b.prefetch) == (128, 4, True) and b.seqs >= a.seqs >= 2
        assert a.working_programs(work) < 1.25 * SM
    else:
        assert b.splits < a.splits and a.seqs == b.seqs == 4 and b.long_tile
        assert b.working_programs(work) >= 1.8 * SM


def test_the_tile_below_2_5_per_sm_only_at_many_splits_where_the_tune_asks():
    """few_programs_tile_split_max_programs_per_sm (off in probe 1.19.0): 8 x 8 KV heads at 4,096 + 128, G 5, in 9
    splits and blocks of two leave 288 working programs, 2.18 per SM: the tile at 2.5 from 4 splits; 24 x 8 at 1,536
    + 128, G 8, in 3 splits and blocks of two (2.18 per SM too) keep the base tile."""
    keyed = dataclasses.replace(DEFAULT_TUNE, few_programs_tile_split_max_programs_per_sm=2.5,
                                few_programs_tile_min_splits=4)
    assert decode_launch_plan(8, 8, 5, 4224, 4096, SM, DEFAULT_TUNE).block_n == 64
    many = decode_launch_plan(8, 8, 5, 4224, 4096, SM, keyed)
    assert _shape(many) == (9, 512, (128, 2, 4), True, 2)
    few = decode_launch_plan(24, 8, 8, 1664, 1536, SM, keyed)
    assert (few.splits, few.block_n, few.seqs) == (3, 64, 2)
