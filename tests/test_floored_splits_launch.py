"""Probe 1.18.0's one split fewer where the split count only rounds the target up
(TuneParams.floor_splits_min_programs_per_sm, own_kernel_plan.floored_splits_launch): golden launches from hand
arithmetic on 132 SMs, the launches it leaves alone, and an invariant over many shapes."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from cascade_plan.own_kernel_launch import tile_of
from cascade_plan.own_kernel_plan import decode_launch_plan
from cascade_plan.own_kernel_tunes import PROBE_1_17_0_TUNE, PROBE_1_18_0_TUNE

SM = 132
BASE = PROBE_1_17_0_TUNE
RULE = dataclasses.replace(BASE, floor_splits_min_programs_per_sm=3.5, floor_splits_min_splits=2)
TO_ONE = dataclasses.replace(RULE, floor_splits_min_splits=1)


def test_probe_1_18_0_is_1_17_0_with_the_rule_down_to_one_split():
    assert PROBE_1_18_0_TUNE == TO_ONE


def test_a_split_count_rounded_up_past_the_target_loses_one_split():
    """128 sequences x 2 KV heads at 1,024 + 128 tokens, 16 query heads per KV head: 256 items want 4 x 132 / 256 =
    2.06 splits and get 3 of 384 tokens (768 programs, 5.8 per SM). Two of 576 leave 512 programs, 3.9 per SM >=
    3.5: the rule launches those, on the same 64-token base tile, without page numbers ahead (576 < 1,024 tokens)."""
    for shared in (1024, 0, None):
        before = decode_launch_plan(128, 2, 16, 1152, shared, SM, BASE)
        after = decode_launch_plan(128, 2, 16, 1152, shared, SM, RULE)
        assert (before.splits, before.tokens_per_split, before.seqs) == (3, 384, 1)
        assert (after.splits, after.tokens_per_split, after.seqs, after.prefetch) == (2, 576, 1, False)
        assert (after.block_n, after.stages, after.warps) == tile_of("base", BASE) == (64, 3, 2)
    # 8 x 8 KV heads at 4,096 + 128 over private pages: 64 items want 8.25 splits, get 9 of 512 (whole 64-token
    # tiles); 8 splits of 576 leave 512 programs, 3.9 per SM
    assert decode_launch_plan(8, 8, 4, 4224, 0, SM, BASE)[:2] == (9, 512)
    assert decode_launch_plan(8, 8, 4, 4224, 0, SM, RULE)[:2] == (8, 576)


def test_two_splits_become_one_only_where_the_tune_allows_it():
    """64 x 8 KV heads at 1,024 + 128 over private pages: 512 items want 1.03 splits, get 2. One split leaves 3.9
    programs per SM; floor_splits_min_splits 2 keeps the split, 1 lets the launch run unsplit on the base tile (page
    numbers ahead: 1,152 >= 1,024 tokens)."""
    assert decode_launch_plan(64, 8, 4, 1152, 0, SM, RULE) == decode_launch_plan(64, 8, 4, 1152, 0, SM, BASE)
    one = decode_launch_plan(64, 8, 4, 1152, 0, SM, TO_ONE)
    assert (one.splits, one.tokens_per_split, one.block_n, one.prefetch, one.seqs) == (1, 1152, 64, True, 1)


def test_the_rule_leaves_other_launches_alone():
    """Fewer items than 3.5 per SM at one split fewer (100 x 2 = 200: 2 splits leave 3.0 per SM), the cascade's suffix
    pass (streaming False: it shares the GPU with the prefix pass), a launch whose blocks would shrink (8 x 8 at 4K
    shared: 9 splits in blocks of four; 8 splits form none), the filled-blocks launch (128 x 4 at G 7: unsplit
    already) and a launch another rule split (the streaming launch at 16K) are the base tune's."""
    cases = [((100, 2, 16, 1152, 0), {}), ((128, 2, 16, 1152, 1024), {"streaming": False}),
             ((8, 8, 4, 4224, 4096), {}), ((128, 4, 7, 1152, 1024), {}), ((64, 8, 4, 1152, 1024), {}),
             ((128, 2, 16, 16512, 0), {})]
    for args, kw in cases:
        for tune in (RULE, TO_ONE):
            assert decode_launch_plan(*args, SM, tune, **kw) == decode_launch_plan(*args, SM, BASE, **kw), args
    assert decode_launch_plan(8, 8, 4, 4224, 4096, SM, BASE).seqs == 4


@settings(max_examples=300, deadline=None)
@given(batch=st.sampled_from([8, 12, 15, 16, 20, 25, 30, 31, 41, 60, 62, 64, 82, 100, 120, 123, 124, 128, 247, 256]),
       kv_heads=st.sampled_from([1, 2, 4, 8, 10]), q_per_kv=st.integers(1, 16), prefix=st.integers(64, 20000),
       private=st.integers(0, 2048), shared=st.booleans(), head_dim=st.sampled_from([64, 128, 256]),
       to_one=st.booleans())
def test_where_the_rule_changes_a_launch_it_has_one_split_fewer_and_no_smaller_blocks(
        batch, kv_heads, q_per_kv, prefix, private, shared, head_dim, to_one):
    tune = TO_ONE if to_one else RULE
    args = (batch, kv_heads, q_per_kv, prefix + private, prefix if shared else 0, SM)
    before = decode_launch_plan(*args, BASE, head_dim=head_dim)
    after = decode_launch_plan(*args, tune, head_dim=head_dim)
    if after != before:
        work = batch * kv_heads
        assert not before.long_tile and not after.long_tile
        assert after.splits < before.splits and after.splits >= tune.floor_splits_min_splits
        assert work * before.splits > BASE.target_programs_per_sm * SM
        assert work * (before.splits - 1) >= 3.5 * SM
        assert after.seqs >= before.seqs
