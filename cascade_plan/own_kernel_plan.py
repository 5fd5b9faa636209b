"""The per-sequence decode's whole launch, as DecodePlan makes it: own_kernel_pages' base launch (splits, tile, page
prefetch, page blocks), then the rules that re-plan it where a measured launch beat the base one: blocks of four in
the wide dot (in one split fewer over short private tails), blocks of twice the sequences in a 32-row dot, the unsplit
batch-filled launch in page blocks, one split fewer where the split count only rounds the target up, the 128-token
four-warp tile where page blocks leave about one program per SM; and fp8's batch-filled launch over private pages on
the base tile. Pure Python, as own_kernel_launch."""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

from cascade_plan.own_kernel_launch import (
    decode_block_g,
    decode_launch_splits,
    decode_prefetch,
    decode_tile_kind,
    longest_split_tokens,
    tile_of,
    whole_tile_splits,
    wide_head,
)
from cascade_plan.own_kernel_pages import (
    decode_launch,
    first_split_blocks,
    floored_group_seqs,
    page_block_seqs,
    tune_at_launch,
    wide_dot_blocks,
    wide_head_stream_tune,
)
from cascade_plan.own_kernel_tune import TuneParams


class DecodeLaunch(NamedTuple):
    """Everything DecodePlan launches paged_decode_kernel with that the host chooses (decode_launch_plan)."""

    splits: int
    tokens_per_split: int
    long_tile: bool
    block_n: int
    stages: int
    warps: int
    prefetch: bool
    seqs: int       # page_block_seqs: SEQS

    def working_programs(self, work_items: int) -> float:
        """Programs of a launch over `work_items` (sequence, KV head) items that do work: a block's other programs
        exit."""
        return work_items * self.splits / max(self.seqs, 1)


def decode_launch_plan(batch: int, kv_heads: int, q_per_kv: int, max_seq_len: int, shared_prefix_tokens: int | None,
                       sm_count: int, tune: TuneParams, *, head_dim: int = 128, force_splits: int | None = None,
                       streaming: bool = True) -> DecodeLaunch:
    """The launch of a per-sequence decode, as DecodePlan makes it and the host's page-block arithmetic
    (own_kernel_blocks) prices it: decode_launch's splits (or force_splits whole-tile splits), the tile and page
    prefetch of its longest split (the last runs to the sequences' end: longest_split_tokens), and its blocks; all at
    `head_dim` (tune_at_launch)."""
    given = tune
    tune = tune_at_launch(tune, head_dim, shared_prefix_tokens, q_per_kv, batch * kv_heads, max_seq_len, sm_count)
    forced = force_splits is not None
    if streaming and not forced:    # the cascade's suffix pass never streams
        tune = wide_head_stream_tune(tune, head_dim, shared_prefix_tokens, batch * kv_heads, max_seq_len, sm_count)
    if force_splits is not None:
        splits, tps = whole_tile_splits(max(max_seq_len, 1), force_splits, tune.decode_block_n)
        long_tile = False
    else:
        splits, tps, long_tile = decode_launch(batch, kv_heads, q_per_kv, max_seq_len, shared_prefix_tokens, sm_count,
                                               tune, head_dim=head_dim, streaming=streaming)
    work = batch * kv_heads
    longest = longest_split_tokens(max(max_seq_len, 1), splits, tps)
    kind = decode_tile_kind(work, splits, longest, long_tile, sm_count, tune, forced=forced)
    if (kind == "filled" and tune.private_filled_base_tile and shared_prefix_tokens == 0
            and head_dim <= tune.narrow_max_head_dim):
        kind = "base"       # over fp8 (tune_at_kv_dtype); page numbers still ahead, as the filled kind's
    block_n, stages, warps = tile_of(kind, tune, head_dim)
    prefetch = decode_prefetch(work, splits, longest, long_tile, sm_count, tune, forced=forced)
    seqs = page_block_seqs(batch, q_per_kv, work * splits, sm_count, tune, shared_prefix_tokens=shared_prefix_tokens,
                           max_seq_len=max_seq_len, tokens_per_split=tps, block_n=block_n)
    la = DecodeLaunch(splits, tps, long_tile, block_n, stages, warps, prefetch, seqs)
    if forced:
        return la
    if tune.wide_dot_four_min_programs_per_sm:
        la = wide_dot_four_launch(batch, kv_heads, q_per_kv, max_seq_len, shared_prefix_tokens, sm_count, tune, la,
                                  head_dim=head_dim, streaming=streaming) or la
    if tune.double_dot_min_programs_per_sm:
        la = double_dot_launch(batch, kv_heads, q_per_kv, max_seq_len, shared_prefix_tokens, sm_count, tune, la,
                               head_dim=head_dim, streaming=streaming) or la
    # after the rules above: neither shrinks the blocks they chose
    if tune.filled_blocks_min_programs_per_sm:
        la = filled_blocks_launch(batch, kv_heads, q_per_kv, max_seq_len, shared_prefix_tokens, sm_count, tune, la,
                                  head_dim=head_dim) or la
    if tune.floor_splits_min_programs_per_sm and streaming:
        la = floored_splits_launch(batch, kv_heads, q_per_kv, max_seq_len, shared_prefix_tokens, sm_count, tune, la,
                                   head_dim=head_dim) or la
    if tune.few_programs_tile_max_programs_per_sm and streaming:
        la = few_programs_tile_launch(batch, kv_heads, q_per_kv, max_seq_len, shared_prefix_tokens, sm_count, tune,
                                      la, head_dim=head_dim) or la
    # only at the head dims the wave rule runs at: elsewhere the launch without it is this one, planned again
    if tune.wide_head_wave_short and not tune.wide_head_wave_short_floored and streaming and wide_head(tune, head_dim):
        la = wave_short_launch(batch, kv_heads, q_per_kv, max_seq_len, shared_prefix_tokens, sm_count, given, la,
                               head_dim=head_dim)
    return la


def wave_short_launch(batch: int, kv_heads: int, q_per_kv: int, max_seq_len: int, shared_prefix_tokens: int | None,
                      sm_count: int, tune: TuneParams, la: DecodeLaunch, *, head_dim: int) -> DecodeLaunch:
    """`la`, the launch with wide_head_wave_short, where the launch without it runs the short tile; else the launch
    without it. The wave rule over short-tile launches was timed where the probe's launch would otherwise be one;
    where a later rule (floored_splits_launch) turns that launch into a base-tile one it has not been timed against
    it, so that launch stays."""
    before = decode_launch_plan(batch, kv_heads, q_per_kv, max_seq_len, shared_prefix_tokens, sm_count,
                                replace(tune, wide_head_wave_short=False), head_dim=head_dim)
    if la == before:
        return la
    t = tune_at_launch(tune, head_dim, shared_prefix_tokens, q_per_kv, batch * kv_heads, max_seq_len, sm_count)
    longest = longest_split_tokens(max(max_seq_len, 1), before.splits, before.tokens_per_split)
    kind = decode_tile_kind(batch * kv_heads, before.splits, longest, before.long_tile, sm_count, t)
    return la if kind == "short" else before


def inner_tune(tune: TuneParams, **changes) -> TuneParams:
    """The tune a block rule re-plans its launch with (`changes` applied): without the rules decode_launch_plan applies
    after the block rules, so that their launches are the ones those rules were timed with, and each later rule sees
    the block rules' final launch once."""
    return replace(tune, filled_blocks_min_programs_per_sm=0.0, floor_splits_min_programs_per_sm=0.0,
                   few_programs_tile_max_programs_per_sm=0.0, **changes)


def filled_blocks_launch(batch: int, kv_heads: int, q_per_kv: int, max_seq_len: int,
                         shared_prefix_tokens: int | None, sm_count: int, tune: TuneParams, launch: DecodeLaunch, *,
                         head_dim: int) -> DecodeLaunch | None:
    """The unsplit launch on the batch-filled tile, in page blocks, where `launch` splits (not the long-context
    launch) a batch over a known shared prefix that gives at least filled_blocks_min_programs_per_sm programs per SM
    but fewer than target_programs_per_sm (the split only rounds the target up: 512 items at 132 SMs want 1.03
    splits, get 2), and blocks form over the whole context (first_split_blocks), leaving
    page_block_min_programs_per_sm working programs per SM, of at least as many sequences as `launch`'s; else None."""
    work = batch * kv_heads
    if (launch.splits == 1 or launch.long_tile or not shared_prefix_tokens
            or work < tune.filled_blocks_min_programs_per_sm * sm_count
            or work >= tune.target_programs_per_sm * sm_count):
        return None
    block_n, stages, warps = tile_of("filled", tune, head_dim)
    seqs = floored_group_seqs(batch, q_per_kv, work, sm_count, tune, block_n)
    # blocks smaller than the split launch's read the shared pages more often than the split and its merge cost: on
    # an H100, blocks of four at head dim 128 that became blocks of two ran 0.95-0.99x (device-2026-12-07c)
    if seqs == 1 or seqs < launch.seqs or not first_split_blocks(shared_prefix_tokens, max_seq_len, max_seq_len,
                                                                  block_n):
        return None
    _, tps = whole_tile_splits(max(max_seq_len, 1), 1, tune.decode_block_n)
    return DecodeLaunch(1, tps, False, block_n, stages, warps, tune.page_prefetch, seqs)


def wide_dot_four_launch(batch: int, kv_heads: int, q_per_kv: int, max_seq_len: int,
                         shared_prefix_tokens: int | None, sm_count: int, tune: TuneParams, launch: DecodeLaunch, *,
                         head_dim: int, streaming: bool) -> DecodeLaunch | None:
    """The launch of blocks of four sequences in a wide dot on 64-token long-context tiles (wide dots on 64-token
    tiles too) where `launch`, the tune's own, forms blocks of two in the wide dot over a known shared prefix and that
    one splits, forms blocks of four and leaves at least wide_dot_four_min_programs_per_sm working programs per SM
    (TuneParams.wide_dot_four_min_programs_per_sm), in one split fewer where that leaves as many and the private tail
    is short (wide_dot_four_fewer_max_private_tokens); else None."""
    if (launch.seqs != 2 or not shared_prefix_tokens or not wide_dot_blocks(q_per_kv, launch.block_n, tune)
            or tune.wide_dot_seqs != 2):
        return None
    four = inner_tune(tune, wide_dot_seqs=4, long_block_n=64, wide_dot_block_n=64, wide_dot_four_min_programs_per_sm=0)
    la = decode_launch_plan(batch, kv_heads, q_per_kv, max_seq_len, shared_prefix_tokens, sm_count, four,
                            head_dim=head_dim, streaming=streaming)
    work = batch * kv_heads
    if la.splits == 1 or la.seqs != 4 or la.working_programs(work) < tune.wide_dot_four_min_programs_per_sm * sm_count:
        return None
    cap = tune.wide_dot_four_fewer_max_private_tokens
    if cap and la.splits > 2 and max_seq_len - shared_prefix_tokens <= cap:
        # the split target is rounded up: 256 items in blocks of four at 2 working programs per SM want 4.1 splits
        splits, tps = whole_tile_splits(max(max_seq_len, 1), la.splits - 1, la.block_n)
        fewer = la._replace(splits=splits, tokens_per_split=tps)
        if (splits < la.splits and fewer.working_programs(work) >= tune.wide_dot_four_min_programs_per_sm * sm_count
                and page_block_seqs(batch, q_per_kv, work * splits, sm_count, four,
                                    shared_prefix_tokens=shared_prefix_tokens, max_seq_len=max_seq_len,
                                    tokens_per_split=tps, block_n=la.block_n) == 4):
            return fewer
    return la


def double_dot_launch(batch: int, kv_heads: int, q_per_kv: int, max_seq_len: int, shared_prefix_tokens: int | None,
                      sm_count: int, tune: TuneParams, launch: DecodeLaunch, *, head_dim: int,
                      streaming: bool) -> DecodeLaunch | None:
    """The launch of blocks of twice the sequences in a 32-row dot (decode_dot_rows 32) where `launch`, the tune's own
    over a known shared prefix, forms blocks of two or more sequences of 1-8 query heads per KV head that fill the
    16-row dot (a block of twice as many would not fit it), and the new launch forms those bigger blocks and leaves at
    least double_dot_min_programs_per_sm working programs per SM (TuneParams.double_dot_min_programs_per_sm), at the
    head dims, block sizes and tiles the tune keys it to (double_dot_min_head_dim, _max_seqs, _min_block_n); else
    None."""
    if (launch.seqs < 2 or not shared_prefix_tokens or tune.decode_dot_rows != 16
            or 2 * launch.seqs * q_per_kv <= decode_block_g(q_per_kv) or 2 * q_per_kv > decode_block_g(q_per_kv)
            or head_dim < tune.double_dot_min_head_dim):
        return None
    wider = inner_tune(tune, decode_dot_rows=32, double_dot_min_programs_per_sm=0.0)
    la = decode_launch_plan(batch, kv_heads, q_per_kv, max_seq_len, shared_prefix_tokens, sm_count, wider,
                            head_dim=head_dim, streaming=streaming)
    working = la.working_programs(batch * kv_heads)
    if (la.seqs > launch.seqs and working >= tune.double_dot_min_programs_per_sm * sm_count
            and la.seqs <= (tune.double_dot_max_seqs or la.seqs) and la.block_n >= tune.double_dot_min_block_n):
        return la
    return None


def floored_splits_launch(batch: int, kv_heads: int, q_per_kv: int, max_seq_len: int,
                          shared_prefix_tokens: int | None, sm_count: int, tune: TuneParams, launch: DecodeLaunch, *,
                          head_dim: int) -> DecodeLaunch | None:
    """The launch of one split fewer (whole base tiles, the tile and blocks that split gives) where `launch` is the
    base target's split count (decode_launch_splits: not the long-context launch, nor a split another rule chose),
    rounded up past target_programs_per_sm programs per SM, and one split fewer still leaves at least
    floor_splits_min_programs_per_sm per SM (floor_splits_private_min_programs_per_sm over private pages, where set)
    and floor_splits_min_splits splits, in page blocks no smaller than
    `launch`'s; else None. 256 items at 132 SMs want 528 / 256 = 2.06 splits, get 3: 768 programs, 5.8 per SM."""
    work = batch * kv_heads
    splits, tps, long_tile = decode_launch_splits(work, max(max_seq_len, 1), sm_count, tune)
    fewer = splits - 1
    least = tune.floor_splits_min_programs_per_sm
    if shared_prefix_tokens == 0 and tune.floor_splits_private_min_programs_per_sm:
        least = tune.floor_splits_private_min_programs_per_sm
    if (long_tile or launch.long_tile or (launch.splits, launch.tokens_per_split) != (splits, tps)
            or fewer < max(tune.floor_splits_min_splits, 1) or work * splits <= tune.target_programs_per_sm * sm_count
            or work * fewer < least * sm_count):
        return None
    la = decode_launch_plan(batch, kv_heads, q_per_kv, max_seq_len, shared_prefix_tokens, sm_count, tune,
                            head_dim=head_dim, force_splits=fewer)
    return la if la.seqs >= launch.seqs and la.splits < splits else None


def few_programs_tile_launch(batch: int, kv_heads: int, q_per_kv: int, max_seq_len: int,
                             shared_prefix_tokens: int | None, sm_count: int, tune: TuneParams, launch: DecodeLaunch,
                             *, head_dim: int) -> DecodeLaunch | None:
    """The launch on the long-context tile (long_block_n tokens, long_stages, long_warps; page numbers an iteration
    ahead) in `launch`'s split count (whole tiles of it), where `launch` runs the base tile on fewer warps over a known
    shared prefix in page blocks and leaves fewer than few_programs_tile_max_programs_per_sm working programs per SM
    (a block's other programs exit: 8 sequences x 8 KV heads in 9 splits and blocks of four leave 144 programs, one
    per SM of two warps; below few_programs_tile_split_max_programs_per_sm where it has few_programs_tile_min_splits
    splits or more), at head dims up to narrow_max_head_dim, in blocks no smaller; else None."""
    base = tile_of("base", tune, head_dim)
    most = tune.few_programs_tile_max_programs_per_sm
    if tune.few_programs_tile_min_splits and launch.splits >= tune.few_programs_tile_min_splits:
        most = max(most, tune.few_programs_tile_split_max_programs_per_sm)
    if (launch.long_tile or launch.seqs < 2 or not shared_prefix_tokens or head_dim > tune.narrow_max_head_dim
            or (launch.block_n, launch.stages, launch.warps) != base or launch.warps >= tune.long_warps
            or launch.working_programs(batch * kv_heads) >= most * sm_count):
        return None
    wide = inner_tune(tune, decode_block_n=tune.long_block_n, decode_stages=tune.long_stages,
                      decode_warps=tune.long_warps, prefetch_min_tokens=0)
    la = decode_launch_plan(batch, kv_heads, q_per_kv, max_seq_len, shared_prefix_tokens, sm_count, wide,
                            head_dim=head_dim, force_splits=launch.splits)
    return la if la.seqs >= launch.seqs else None
