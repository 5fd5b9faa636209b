"""The unsplit batch-filled launch in page blocks (TuneParams.filled_blocks_min_programs_per_sm, off by default):
golden launches from hand arithmetic on 132 SMs, the launches it leaves alone, and an invariant over many shapes."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from cascade_plan.own_kernel_launch import tile_of
from cascade_plan.own_kernel_pages import decode_launch_plan
from cascade_plan.own_kernel_tune import DEFAULT_TUNE

SM = 132
FILLED = dataclasses.replace(DEFAULT_TUNE, filled_blocks_min_programs_per_sm=3.5)


def test_a_batch_just_short_of_the_target_runs_unsplit_in_blocks():
    """128 sequences x 4 KV heads at 1,024 shared + 128 tokens, 7 query heads per KV head: 512 items, 3.88 per SM,
    want 528 / 512 = 1.03 splits, so the default splits in two of 576 on the 64-token base tile (blocks of two). The
    rule runs it unsplit on the batch-filled tile (128 tokens, 2 stages, 4 warps, page numbers an iteration ahead) in
    blocks of two: a block's 14 rows fit the 16-row dot, and 512 items >= 2 x 132 (page_block_min_programs_per_sm 1
    per block sequence)."""
    before = decode_launch_plan(128, 4, 7, 1152, 1024, SM, DEFAULT_TUNE)
    after = decode_launch_plan(128, 4, 7, 1152, 1024, SM, FILLED)
    assert (before.splits, before.tokens_per_split, before.block_n, before.seqs) == (2, 576, 64, 2)
    assert (after.splits, after.tokens_per_split, after.long_tile, after.seqs, after.prefetch) == (1, 1152, False, 2,
                                                                                                    True)
    assert (after.block_n, after.stages, after.warps) == tile_of("filled", DEFAULT_TUNE) == (128, 2, 4)
    # 64 x 8 KV heads at 4 query heads: blocks of four would need 4 x 132 = 528 items; 512 keep blocks of two
    assert decode_launch_plan(64, 8, 4, 1152, 1024, SM, FILLED).seqs == 2


def test_the_rule_leaves_other_launches_alone():
    """Below 3.5 items per SM (56 x 8 = 448), at the target (66 x 8 = 528: the default's own batch-filled launch),
    over private or unknown pages, on the long-context launch (64 x 8 at 16K + 128: 3 splits of 5,504) and where the
    private tail is too long for a block over the whole context (1K + 1K) the launch is the default's."""
    for args in ((56, 8, 4, 1152, 1024), (66, 8, 4, 1152, 1024), (128, 4, 7, 1152, 0), (128, 4, 7, 1152, None),
                 (64, 8, 4, 16512, 16384), (64, 8, 4, 2048, 1024)):
        assert decode_launch_plan(*args, SM, FILLED) == decode_launch_plan(*args, SM, DEFAULT_TUNE), args
    assert decode_launch_plan(64, 8, 4, 16512, 16384, SM, DEFAULT_TUNE).long_tile


@settings(max_examples=80, deadline=None)
@given(batch=st.sampled_from([8, 16, 32, 48, 56, 60, 62, 64, 96, 120, 124, 128, 240, 256, 512]),
       kv_heads=st.sampled_from([1, 2, 4, 8, 10]), q_per_kv=st.integers(1, 16), prefix=st.integers(64, 20000),
       private=st.integers(0, 2048), head_dim=st.sampled_from([64, 128, 256]))
def test_where_the_rule_changes_a_launch_it_is_unsplit_in_blocks_between_the_two_targets(batch, kv_heads, q_per_kv,
                                                                                         prefix, private, head_dim):
    before = decode_launch_plan(batch, kv_heads, q_per_kv, prefix + private, prefix, SM, DEFAULT_TUNE,
                                head_dim=head_dim)
    after = decode_launch_plan(batch, kv_heads, q_per_kv, prefix + private, prefix, SM, FILLED, head_dim=head_dim)
    if after != before:
        assert before.splits > 1 and not before.long_tile
        assert after.splits == 1 and after.seqs >= 2
        assert 3.5 * SM <= batch * kv_heads < DEFAULT_TUNE.target_programs_per_sm * SM
