"""Probe 1.17.0's unsplit batch-filled launch in page blocks (TuneParams.filled_blocks_min_programs_per_sm): golden
launches from hand arithmetic on 132 SMs, the launches it leaves as probe 1.16.0 had them, and an invariant over
many shapes."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from cascade_plan.own_kernel_launch import tile_of
from cascade_plan.own_kernel_plan import decode_launch_plan
from cascade_plan.own_kernel_tunes import PROBE_1_16_0_TUNE, PROBE_1_17_0_TUNE

SM = 132


def test_probe_1_17_0_is_1_16_0_with_the_rule_at_three_and_a_half_items_per_sm():
    assert PROBE_1_17_0_TUNE == dataclasses.replace(PROBE_1_16_0_TUNE, filled_blocks_min_programs_per_sm=3.5)
    assert PROBE_1_17_0_TUNE.floor_splits_min_programs_per_sm == 0


def test_a_batch_just_short_of_the_target_runs_unsplit_in_blocks():
    """128 sequences x 4 KV heads at 1,024 shared + 128 tokens, 7 query heads per KV head: 512 items, 3.88 per SM,
    want 528 / 512 = 1.03 splits, so probe 1.16.0 splits in two of 576 on the 64-token base tile (blocks of two).
    Probe 1.17.0 runs it unsplit on the batch-filled tile (128 tokens, 2 stages, 4 warps, page numbers an iteration
    ahead) in blocks of two: a block's 14 rows fit the 16-row dot, and 512 items >= 2 x 132
    (page_block_min_programs_per_sm 1 per block sequence)."""
    before = decode_launch_plan(128, 4, 7, 1152, 1024, SM, PROBE_1_16_0_TUNE)
    after = decode_launch_plan(128, 4, 7, 1152, 1024, SM, PROBE_1_17_0_TUNE)
    assert (before.splits, before.tokens_per_split, before.block_n, before.seqs) == (2, 576, 64, 2)
    assert (after.splits, after.tokens_per_split, after.long_tile, after.seqs, after.prefetch) == (1, 1152, False, 2,
                                                                                                    True)
    assert (after.block_n, after.stages, after.warps) == tile_of("filled", PROBE_1_17_0_TUNE) == (128, 2, 4)
    # 128 x 4 at 12 query heads: no block on the 64-token split (the wide dot needs 128-token tiles); unsplit, blocks
    # of two in the 32-row wide dot
    assert decode_launch_plan(128, 4, 12, 1152, 1024, SM, PROBE_1_16_0_TUNE).seqs == 1
    assert decode_launch_plan(128, 4, 12, 1152, 1024, SM, PROBE_1_17_0_TUNE)[:2] == (1, 1152)


def test_blocks_never_shrink():
    """64 x 8 KV heads at 4 query heads: the split launch forms blocks of four; unsplit, blocks of four would need
    4 x 132 = 528 items and 512 allow two, so the launch stays split."""
    before = decode_launch_plan(64, 8, 4, 1152, 1024, SM, PROBE_1_16_0_TUNE)
    assert (before.splits, before.seqs) == (2, 4)
    assert decode_launch_plan(64, 8, 4, 1152, 1024, SM, PROBE_1_17_0_TUNE) == before


def test_the_rule_leaves_other_launches_alone():
    """Below 3.5 items per SM (112 x 4 = 448), at the target (66 x 8 = 528: probe 1.16.0's own batch-filled launch),
    over private or unknown pages, on the long-context launch (128 x 4 at 16K + 128: 3 splits of 5,504) and where the
    private tail is too long for a block over the whole context (1K + 1K) the launch is probe 1.16.0's."""
    for args in ((112, 4, 7, 1152, 1024), (66, 8, 4, 1152, 1024), (128, 4, 7, 1152, 0), (128, 4, 7, 1152, None),
                 (128, 4, 7, 16512, 16384), (128, 4, 7, 2048, 1024)):
        after = decode_launch_plan(*args, SM, PROBE_1_17_0_TUNE)
        assert after == decode_launch_plan(*args, SM, PROBE_1_16_0_TUNE), args
    assert decode_launch_plan(128, 4, 7, 16512, 16384, SM, PROBE_1_17_0_TUNE).long_tile


@settings(max_examples=80, deadline=None)
@given(batch=st.sampled_from([8, 16, 32, 48, 56, 60, 62, 64, 96, 120, 124, 128, 240, 256, 512]),
       kv_heads=st.sampled_from([1, 2, 4, 8, 10]), q_per_kv=st.integers(1, 16), prefix=st.integers(64, 20000),
       private=st.integers(0, 2048), head_dim=st.sampled_from([64, 128, 256]))
def test_where_the_rule_changes_a_launch_it_is_unsplit_in_no_smaller_blocks_between_the_two_targets(
        batch, kv_heads, q_per_kv, prefix, private, head_dim):
    before = decode_launch_plan(batch, kv_heads, q_per_kv, prefix + private, prefix, SM, PROBE_1_16_0_TUNE,
                                head_dim=head_dim)
    after = decode_launch_plan(batch, kv_heads, q_per_kv, prefix + private, prefix, SM, PROBE_1_17_0_TUNE,
                               head_dim=head_dim)
    if after != before:
        assert before.splits > 1 and not before.long_tile
        assert after.splits == 1 and after.seqs >= max(2, before.seqs)
        assert 3.5 * SM <= batch * kv_heads < PROBE_1_17_0_TUNE.target_programs_per_sm * SM
