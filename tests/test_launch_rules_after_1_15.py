"""Launch rules timed after probe 1.15.0 (TuneParams fields that default to off; probe 1.16.0 turns the whole-wave
split over shared pages on): golden launches from hand arithmetic on 132 SMs, and the launches every other shape
keeps."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from cascade_plan.own_kernel_launch import decode_block_g
from cascade_plan.own_kernel_plan import decode_launch_plan
from cascade_plan.own_kernel_tunes import PROBE_1_15_0_TUNE, PROBE_1_16_0_TUNE

SM = 132
# the doubled dot was written and timed against probe 1.16.0 (1.17.0 runs some of its shapes unsplit)
BASE = PROBE_1_16_0_TUNE
DOUBLED = dataclasses.replace(BASE, double_dot_min_programs_per_sm=1.8)


def test_a_doubled_dot_holds_twice_the_sequences_where_enough_programs_work():
    """128 sequences x 4 KV heads at 1,024 shared + 128 tokens, 7 query heads per KV head (a Qwen2.5-7B layer). Probe
    1.15.0 launches 2 splits of 576 in blocks of two (14 of the 16 rows): 128 x 4 x 2 / 2 = 512 working programs.
    Blocks of four fill 28 of a 32-row dot and leave 256 working programs, 1.94 per SM: at least 1.8, so the rule
    takes them, same splits and tile."""
    before = decode_launch_plan(128, 4, 7, 1152, 1024, SM, BASE)
    after = decode_launch_plan(128, 4, 7, 1152, 1024, SM, DOUBLED)
    assert (before.splits, before.tokens_per_split, before.block_n, before.seqs) == (2, 576, 64, 2)
    assert after == before._replace(seqs=4)
    assert decode_block_g(7, 4) == 32
    # 256 x 8 KV heads at 4 query heads, unsplit: blocks of four (512 working) become blocks of eight (256 working)
    assert decode_launch_plan(256, 8, 4, 1152, 1024, SM, DOUBLED).seqs == 8
    # 128 x 8 at 4 query heads: blocks of eight would leave 128 working programs, 0.97 per SM; the launch stays
    la = decode_launch_plan(128, 8, 4, 1152, 1024, SM, BASE)
    assert la.seqs == 4 and decode_launch_plan(128, 8, 4, 1152, 1024, SM, DOUBLED) == la


def test_a_doubled_dot_needs_a_known_shared_prefix_and_at_most_eight_query_heads():
    """Over private pages, pages the caller does not know, or 9-16 query heads per KV head (the wide dot's rules) the
    launch is probe 1.15.0's."""
    for args in ((128, 4, 7, 1152, 0), (128, 4, 7, 1152, None), (128, 2, 12, 1152, 1024), (128, 2, 16, 1152, 1024)):
        assert decode_launch_plan(*args, SM, DOUBLED) == decode_launch_plan(*args, SM, BASE)


@settings(max_examples=60, deadline=None)
@given(batch=st.sampled_from([8, 16, 32, 48, 64, 96, 128, 256, 512]), kv_heads=st.sampled_from([1, 2, 4, 8]),
       q_per_kv=st.integers(1, 16), prefix=st.integers(64, 20000), private=st.integers(0, 2048))
def test_a_doubled_dot_only_ever_doubles_blocks_and_leaves_enough_working_programs(batch, kv_heads, q_per_kv, prefix,
                                                                                   private):
    """Wherever the rule changes a launch, the new blocks hold more sequences in a dot of at most 32 rows and leave
    1.8+ working programs per SM; elsewhere the launch is probe 1.15.0's."""
    before = decode_launch_plan(batch, kv_heads, q_per_kv, prefix + private, prefix, SM, BASE)
    after = decode_launch_plan(batch, kv_heads, q_per_kv, prefix + private, prefix, SM, DOUBLED)
    if after != before:
        assert q_per_kv <= 8 and after.seqs > before.seqs >= 2
        assert decode_block_g(q_per_kv, after.seqs) == 32
        assert batch * kv_heads * after.splits / after.seqs >= 1.8 * SM


def test_probe_1_16_0_splits_head_dim_256_into_whole_waves_over_shared_pages_where_no_block_forms():
    """Probe 1.16.0 is 1.15.0 with wide_head_wave_shared on: 3 sequences x 2 KV heads of 8 query heads at 30,720
    shared + 512 tokens (no block: 3 sequences do not pair) go from 82 splits of 384 (two waves of 264 programs) to
    the 41 of 768 their private twin takes (one wave); the doubled dot stays off."""
    assert PROBE_1_16_0_TUNE == dataclasses.replace(PROBE_1_15_0_TUNE, wide_head_wave_shared=True)
    assert PROBE_1_16_0_TUNE.double_dot_min_programs_per_sm == 0
    assert decode_launch_plan(3, 2, 8, 31232, 30720, SM, PROBE_1_15_0_TUNE, head_dim=256)[:2] == (82, 384)
    la = decode_launch_plan(3, 2, 8, 31232, 30720, SM, PROBE_1_16_0_TUNE, head_dim=256)
    assert (la.splits, la.tokens_per_split, la.seqs) == (41, 768, 1)


def test_the_keyed_doubled_dot_leaves_head_dim_64_blocks_of_16_and_two_warp_tiles_alone():
    """double_dot_min_head_dim 128, _max_seqs 8, _min_block_n 128: of the doubled dot's four losing launches
    (device-2026-12-07b) three keep probe 1.16.0's launch: 192 x 2 KV heads of 7 query heads at head dim 64,
    1.5K + 256; 256 x 16 of 2 at 3K + 128 (blocks of 16); 128 x 4 of 7 at 1K + 128 (64-token two-warp tile). A
    winner, 256 x 4 of 7 at 1.5K + 256, still doubles."""
    keyed = dataclasses.replace(DOUBLED, double_dot_min_head_dim=128, double_dot_max_seqs=8, double_dot_min_block_n=128)
    for args, kw in (((192, 2, 7, 1792, 1536), {"head_dim": 64}), ((256, 16, 2, 3200, 3072), {}),
                     ((128, 4, 7, 1152, 1024), {})):
        assert decode_launch_plan(*args, SM, DOUBLED, **kw) != decode_launch_plan(*args, SM, BASE, **kw)
        assert decode_launch_plan(*args, SM, keyed, **kw) == decode_launch_plan(*args, SM, BASE, **kw)
    assert decode_launch_plan(256, 4, 7, 1792, 1536, SM, keyed).seqs == 4
