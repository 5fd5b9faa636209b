"""Launch rules timed after probe 1.14.0 (TuneParams fields that default to off; probe 1.15.0 turns them on): golden
launches from hand arithmetic on 132 SMs over probe 1.14.0's tune, and the launches every other shape keeps."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from cascade_plan.own_kernel_launch import wave_splits, whole_tile_splits
from cascade_plan.own_kernel_pages import block_fill_splits
from cascade_plan.own_kernel_plan import decode_launch_plan
from cascade_plan.own_kernel_tunes import PROBE_1_14_0_TUNE, PROBE_1_15_0_TUNE

SM = 132
P14 = PROBE_1_14_0_TUNE


def test_block_fill_rounds_its_split_down_where_rounding_up_loses_the_blocks():
    """4 sequences x 8 KV heads at 5,888 shared + 256 tokens, head dim 256, one query head per KV head (a Gemma-7B
    layer at TP 2). Block fill wants max(ceil(132 / (1 block x 8 KV heads)), ceil(4 x 132 / 32)) = 17 splits of the
    prefix: ceil(5,888 / 17) = 347 tokens, 384 in whole 64-token tiles, so ceil(6,144 / 384) = 16 splits and
    32 x 16 = 512 programs, short of the 528 blocks need: no fill, and the base launch (12 splits of 512) forms no
    block. Rounded down a tile, 320-token splits: ceil(6,144 / 320) = 20 splits, 640 programs, blocks of four."""
    down = dataclasses.replace(P14, block_fill_shorter_min_seqs=2)
    assert block_fill_splits(4, 8, 1, 6144, 5888, 12, SM, P14, 256) is None
    la = decode_launch_plan(4, 8, 1, 6144, 5888, SM, P14, head_dim=256)
    assert (la.splits, la.tokens_per_split, la.seqs) == (12, 512, 1)
    assert block_fill_splits(4, 8, 1, 6144, 5888, 12, SM, down, 256) == (20, 320)
    la = decode_launch_plan(4, 8, 1, 6144, 5888, SM, down, head_dim=256)
    assert (la.splits, la.tokens_per_split, la.seqs) == (20, 320, 4)
    # where rounding up already leaves enough programs the split stays: 8 x 4 KV heads at 4,096 + 128 (17 of 256)
    assert block_fill_splits(8, 4, 2, 4224, 4096, 11, SM, down, 256) == (17, 256)
    # never below block_fill_min_tokens: a prefix of 2 x 256 tokens over 2 sequences x 1 KV head stays unfilled
    assert block_fill_splits(2, 1, 2, 544, 512, 1, SM, down, 256) is None


def test_wave_splits_fill_whole_waves_of_two_programs_per_sm():
    """8 x 4 KV heads at 4,224 private tokens, head dim 256 (two programs per SM: 264 slots). The base launch takes
    11 splits of 384: 352 programs, two waves, 2 x (384 + 64) = 896 token-waves. Eight splits of 576 fill one wave of
    256 programs: 576 + 64 = 640, the fewest among 1-12 splits (12 of 352 round to 11 of 384)."""
    assert wave_splits(32, 4224, SM, 64, min_tokens=128, ctas_per_sm=2, max_waves=0, max_splits=12) == (8, 576)
    waves = dataclasses.replace(P14, wide_head_wave_ctas=2)
    assert decode_launch_plan(8, 4, 2, 4224, 0, SM, P14, head_dim=256)[:2] == (11, 384)
    assert decode_launch_plan(8, 4, 2, 4224, 0, SM, waves, head_dim=256)[:2] == (8, 576)
    # over a known shared prefix, at head dim 128 and in the cascade's suffix pass the launch stays
    for args, kw in (((8, 4, 2, 4224, 4096), {"head_dim": 256}), ((8, 4, 2, 4224, 0), {"head_dim": 128}),
                     ((8, 4, 2, 4224, 0), {"head_dim": 256, "streaming": False})):
        assert decode_launch_plan(*args, SM, waves, **kw) == decode_launch_plan(*args, SM, P14, **kw)


def test_wave_splits_in_at_most_one_wave():
    """20 sequences x 8 KV heads at 1,952 private tokens (160 items, not a tiny launch: 256-token splits at least, 7
    at most). Token-waves per split count 1-7: 1 x 2,048, 2 x 1,088, 2 x 768, 3 x 576, 4 x 512, 4 x 448, 5 x 384:
    three splits of 704 (480 programs, two waves). In one wave only one split qualifies: 1,984 tokens, 160 programs."""
    kw = dict(min_tokens=256, ctas_per_sm=2, max_splits=12)
    assert wave_splits(160, 1952, SM, 64, max_waves=0, **kw) == (3, 704)
    assert wave_splits(160, 1952, SM, 64, max_waves=1, **kw) == (1, 1984)
    one = dataclasses.replace(P14, wide_head_wave_ctas=2, wide_head_wave_max=1)
    assert decode_launch_plan(20, 8, 1, 1952, 0, SM, one, head_dim=256)[:2] == (1, 1984)
    # a candidate the caller's condition rejects is skipped; none left: None
    assert wave_splits(160, 1952, SM, 64, max_waves=0, keep=lambda s, t: s != 3, **kw) == (4, 512)
    assert wave_splits(160, 1952, SM, 64, max_waves=0, keep=lambda s, t: False, **kw) is None


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 600), st.integers(64, 70000), st.integers(1, 4), st.integers(0, 3))
def test_wave_splits_never_costs_more_token_waves_than_a_candidate_it_passed_over(work, tokens, ctas, max_waves):
    """Its launch is whole tiles covering every token, within max_splits, and no split count it considered takes
    fewer token-waves."""
    got = wave_splits(work, tokens, SM, 64, min_tokens=128, ctas_per_sm=ctas, max_waves=max_waves, max_splits=16)
    assert got is not None
    splits, tps = got
    assert tps % 64 == 0 and splits * tps >= tokens > (splits - 1) * tps and splits <= 16

    def cost(s: int, t: int) -> int:
        return -(-work * s // (ctas * SM)) * (t + 64)

    for s in range(1, min(16, tokens // 128) + 1):
        real, t = whole_tile_splits(tokens, s, 64)
        if not max_waves or -(-work * real // (ctas * SM)) <= max_waves or real == 1:
            assert cost(splits, tps) <= cost(real, t)


def test_blocks_of_four_on_64_token_tiles_where_they_leave_enough_working_programs():
    """G 16, 128 sequences x 2 KV heads at 16K + 128 over shared pages: probe 1.14.0 takes 5 long-context splits of
    3,328 tokens on 128-token tiles in blocks of two. Blocks of four on 64-token tiles keep the split and leave
    256 x 5 / 4 = 320 working programs, 1.8 x 132 = 237.6 or more: taken. 16 x 1 KV head at 32K + 128 would leave
    16 x 33 / 4 = 132 (1 per SM): kept as it is."""
    four = dataclasses.replace(P14, wide_dot_four_min_programs_per_sm=1.8)
    base = decode_launch_plan(128, 2, 16, 16512, 16384, SM, P14)
    assert (base.splits, base.tokens_per_split, base.block_n, base.seqs) == (5, 3328, 128, 2)
    la = decode_launch_plan(128, 2, 16, 16512, 16384, SM, four)
    assert (la.splits, la.tokens_per_split, la.block_n, la.seqs, la.long_tile) == (5, 3328, 64, 4, True)
    assert decode_launch_plan(16, 1, 16, 32896, 32768, SM, four) == decode_launch_plan(16, 1, 16, 32896, 32768, SM,
                                                                                         P14)
    # private pages, 4 query heads per KV head (no wide dot), a forced split: as probe 1.14.0 launches them
    for args, kw in (((128, 2, 16, 16512, 0), {}), ((128, 8, 4, 16512, 16384), {}),
                     ((128, 2, 16, 16512, 16384), {"force_splits": 5})):
        assert decode_launch_plan(*args, SM, four, **kw) == decode_launch_plan(*args, SM, P14, **kw)


def test_block_fill_rounds_down_only_for_blocks_of_the_size_it_asks_for():
    """block_fill_shorter_min_seqs 4: the 4 x 8 KV heads at 5,888 + 256 launch above forms blocks of four and is
    filled; 12 sequences of 8 query heads x 2 KV heads (a Qwen3-Next-like layer) at 7,424 + 96 form blocks of two at
    most (16 rows / 8) and keep probe 1.14.0's launch of 12 splits of 640, where blocks of any size take 24 of 320."""
    four = dataclasses.replace(P14, block_fill_shorter_min_seqs=4)
    any_size = dataclasses.replace(P14, block_fill_shorter_min_seqs=1)
    assert decode_launch_plan(4, 8, 1, 6144, 5888, SM, four, head_dim=256)[:2] == (20, 320)
    assert decode_launch_plan(12, 2, 8, 7520, 7424, SM, four, head_dim=256)[:2] == (12, 640)
    la = decode_launch_plan(12, 2, 8, 7520, 7424, SM, any_size, head_dim=256)
    assert (la.splits, la.tokens_per_split, la.seqs) == (24, 320, 2)


def test_probe_1_15_0_launches_head_dim_256_in_waves_and_blocks_of_four():
    """Probe 1.15.0's tune has the wave rule (two per SM, any number of waves), blocks of four at 1.8+ working programs
    per SM and block fill's rounded-down split for blocks of four on, and launches the shapes above as they do."""
    t = PROBE_1_15_0_TUNE
    assert (t.wide_head_wave_ctas, t.wide_head_wave_max, t.wide_dot_four_min_programs_per_sm) == (2, 0, 1.8)
    assert t.block_fill_shorter_min_seqs == 4
    assert t == dataclasses.replace(P14, wide_head_wave_ctas=2, wide_dot_four_min_programs_per_sm=1.8,
                                    block_fill_shorter_min_seqs=4)
    assert decode_launch_plan(8, 4, 2, 4224, 0, SM, t, head_dim=256)[:2] == (8, 576)
    assert decode_launch_plan(128, 2, 16, 16512, 16384, SM, t).seqs == 4
    assert decode_launch_plan(4, 8, 1, 6144, 5888, SM, t, head_dim=256)[:2] == (20, 320)
    assert decode_launch_plan(12, 2, 8, 7520, 7424, SM, t, head_dim=256)[:2] == (12, 640)


def test_whole_waves_over_shared_pages_only_where_no_block_forms():
    """wide_head_wave_shared (off in probe 1.15.0): 3 sequences x 2 KV heads of 8 query heads at 30,720 shared + 512
    tokens form no block (3 does not divide into blocks), so the launch is its private twin's before the wave rule: 82
    splits of 384, 492 programs, two waves of 264 (2 x 448 token-waves). One wave holds at most 44 splits, of 768
    tokens once whole tiles (41 splits, 246 programs: 832), the twin's launch under the rule. Launches that form
    blocks keep them; a prefix the caller does not know (None) keeps its launch."""
    t = PROBE_1_15_0_TUNE
    shared = dataclasses.replace(t, wide_head_wave_shared=True)
    assert decode_launch_plan(3, 2, 8, 31232, 30720, SM, t, head_dim=256)[:2] == (82, 384)
    assert decode_launch_plan(3, 2, 8, 31232, 0, SM, t, head_dim=256)[:2] == (41, 768)
    la = decode_launch_plan(3, 2, 8, 31232, 30720, SM, shared, head_dim=256)
    assert (la.splits, la.tokens_per_split, la.seqs) == (41, 768, 1)
    for args in ((8, 4, 2, 4224, 4096), (4, 8, 1, 6144, 5888), (3, 2, 8, 31232, None), (3, 2, 8, 31232, 0)):
        assert decode_launch_plan(*args, SM, shared, head_dim=256) == decode_launch_plan(*args, SM, t, head_dim=256)
    assert decode_launch_plan(8, 4, 2, 4224, 4096, SM, shared, head_dim=256).seqs == 4
