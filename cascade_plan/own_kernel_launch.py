"""Launch arithmetic of the probe's Triton kernels: tile sizes, split counts, page blocks and the softmax scale,
chosen on the host before any launch. Pure Python (no torch, no triton): its tests run where neither is installed,
and they check the numbers the GPU runs use. A leaf of the planner's package, so that the probe that launches the
kernels and the planner that prices them read one rule."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

from cascade_plan.own_kernel_tune import TuneParams

LOG2E = 1.4426950408889634


def wide_head(tune: TuneParams, head_dim: int) -> bool:
    """Is `head_dim` one the tune launches on wide-head tiles (at least tune.wide_head_min_dim; 0: none)?"""
    return bool(tune.wide_head_min_dim) and head_dim >= tune.wide_head_min_dim


def tune_at_head_dim(tune: TuneParams, head_dim: int) -> TuneParams:
    """The tune a launch at `head_dim` runs: `tune` itself, or at head dims of at least tune.wide_head_min_dim its
    batch-filled and long-context tiles cut to wide_head_block_n tokens, its base tile never prefetching and its
    split target wide_head_programs_per_sm where set; or, where wide_head_stages is set, its base, batch-filled and
    long-context tiles all of wide_head_tile_n tokens in that many stages, every one prefetching. Every host rule
    that takes a head dim starts here, so that the probe's launches and the planner's page blocks agree. Applying it
    twice gives the same tune."""
    if not wide_head(tune, head_dim):
        return tune
    target = tune.wide_head_programs_per_sm or tune.target_programs_per_sm
    if tune.wide_head_stages and not tune.wide_head_stages_max_tokens:    # capped: own_kernel_pages.tune_at_launch
        # every tile but the short one double-buffered (or deeper): prefetching
        n, st = tune.wide_head_tile_n, tune.wide_head_stages
        return replace(tune, decode_block_n=n, decode_stages=st, decode_block_n_large_batch=n,
                       decode_stages_large_batch=st, long_block_n=n if tune.long_block_n else 0, long_stages=st,
                       prefetch_min_tokens=0, target_programs_per_sm=target)
    n = tune.wide_head_block_n
    return replace(tune, decode_block_n_large_batch=min(tune.decode_block_n_large_batch, n),
                   long_block_n=min(tune.long_block_n, n) if tune.long_block_n else 0,
                   prefetch_max_programs_per_sm=0, prefetch_min_tokens=1 << 30, target_programs_per_sm=target)


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def whole_tile_splits(tokens: int, splits: int, block_n: int) -> tuple[int, int]:
    """(splits, tokens per split) of `tokens` cut into `splits` splits of whole block_n-token tiles: the tokens per
    split rounded up to a tile, which can leave fewer splits."""
    tps = ceil_div(ceil_div(tokens, splits), block_n) * block_n
    return ceil_div(tokens, tps), tps


def persistent_programs(work_items: int, sm_count: int, per_sm: int) -> int:
    """Programs P of a persistent launch whose program p takes work items p, p + P, p + 2P, ...: the fewest items
    a program (rounds) that sm_count * per_sm resident programs need, then the fewest programs that take every item
    in that many rounds, so that each program takes `rounds` items or one fewer."""
    if work_items <= 0:
        return 1
    rounds = ceil_div(work_items, max(sm_count * per_sm, 1))
    return ceil_div(work_items, rounds)


def choose_splits(work_items: int, tokens: int, sm_count: int, block_n: int, *, min_tokens: int,
                  target_per_sm: int) -> tuple[int, int]:
    """Split count and tokens per split (a multiple of block_n) so that work_items * splits fills the GPU."""
    if tokens <= 0:
        return 1, block_n
    want = ceil_div(target_per_sm * sm_count, max(work_items, 1))
    max_splits = max(1, tokens // max(min_tokens, block_n))
    return whole_tile_splits(tokens, max(1, min(want, max_splits)), block_n)


def longest_split_tokens(max_seq_len: int, splits: int, tokens_per_split: int) -> int:
    """Tokens of a launch's longest split: tokens_per_split, or more where the last split runs past it to the
    sequences' end (own_kernel_pages.shared_head_split gives two splits where equal ones would be more)."""
    return max(tokens_per_split, max_seq_len - (splits - 1) * tokens_per_split)


def tiny_launch(work_items: int, tokens: int, tune: TuneParams) -> bool:
    """Is a per-sequence decode tiny: few (sequence, KV head) work items over a short context?"""
    return work_items <= tune.tiny_work_items and tokens <= tune.tiny_max_tokens


def decode_min_tokens(work_items: int, tokens: int, tune: TuneParams) -> int:
    """The per-sequence decode's split floor: decode_min_tokens_per_split for a tiny launch, else
    min_tokens_per_split."""
    return tune.decode_min_tokens_per_split if tiny_launch(work_items, tokens, tune) else tune.min_tokens_per_split


def decode_long_tile(work_items: int, tokens: int, sm_count: int, tune: TuneParams) -> bool:
    """Does the per-sequence decode take the long-context launch (more splits than the base target gives, each of
    at least long_min_tokens_per_split tokens) with its own tile (tune.long_block_n)?"""
    if not tune.long_block_n:
        return False
    s0, _ = choose_splits(work_items, tokens, sm_count, tune.decode_block_n, target_per_sm=tune.target_programs_per_sm,
                          min_tokens=decode_min_tokens(work_items, tokens, tune))
    s1, _ = decode_splits(work_items, tokens, sm_count, tune.long_block_n, tune)
    return s1 > s0


def decode_launch_splits(work_items: int, tokens: int, sm_count: int, tune: TuneParams) -> tuple[int, int, bool]:
    """(splits, tokens per split, long tile?) of a per-sequence decode launch as DecodePlan makes it: the base tile's
    split, or the long-context launch's with its own tile."""
    if decode_long_tile(work_items, tokens, sm_count, tune):
        return (*decode_splits(work_items, tokens, sm_count, tune.long_block_n, tune), True)
    splits, tps = decode_splits(work_items, tokens, sm_count, tune.decode_block_n, tune)
    return (*merge_capped_splits(work_items, tokens, splits, tps, sm_count, tune), False)


def merge_capped_splits(work_items: int, tokens: int, splits: int, tokens_per_split: int, sm_count: int,
                        tune: TuneParams) -> tuple[int, int]:
    """(splits, tokens per split) of a base-tile launch: a tiny launch of more than fused_merge_max_splits splits in
    that many, where they still give tiny_fused_programs_per_sm programs per SM; else the launch as given."""
    cap = tune.fused_merge_max_splits
    if (tune.tiny_fused_programs_per_sm and splits > cap and tiny_launch(work_items, tokens, tune)
            and work_items * cap >= tune.tiny_fused_programs_per_sm * sm_count):
        return whole_tile_splits(tokens, cap, tune.decode_block_n)
    return splits, tokens_per_split


def stream_splits(work_items: int, tokens: int, sm_count: int, tune: TuneParams) -> tuple[int, int]:
    """(splits, tokens per split) of the streaming launch (TuneParams.stream_programs_per_sm): the most splits that
    keep the launch within that many programs per SM, each of at least stream_min_tokens tokens (whole base tiles)."""
    want = max(1, min(tune.stream_programs_per_sm * sm_count // work_items, tokens // tune.stream_min_tokens))
    return whole_tile_splits(tokens, want, tune.decode_block_n)


def decode_tile_kind(work_items: int, splits: int, tokens_per_split: int, long_tile: bool, sm_count: int,
                     tune: TuneParams, *, forced: bool = False) -> str:
    """Which tile a per-sequence decode launch runs: 'short' where a split holds few tokens (the cascade's suffix
    pass), 'filled' once the batch alone fills the GPU (no split; not for a forced split count), 'long' where the
    long-context launch split it, else 'base'. tokens_per_split: the longest split's (longest_split_tokens)."""
    if tokens_per_split <= tune.decode_short_tokens:
        return "short"
    if not forced and splits == 1 and work_items >= tune.target_programs_per_sm * sm_count:
        return "filled"
    return "long" if long_tile else "base"


def decode_tile(work_items: int, splits: int, tokens_per_split: int, long_tile: bool, sm_count: int, tune: TuneParams,
                *, forced: bool = False, head_dim: int = 128) -> tuple[int, int, int]:
    """(block_n, stages, warps) of a per-sequence decode launch: the tile of its kind (decode_tile_kind, tile_of)."""
    kind = decode_tile_kind(work_items, splits, tokens_per_split, long_tile, sm_count, tune, forced=forced)
    return tile_of(kind, tune, head_dim)


TILE_KINDS = ("base", "filled", "long", "short")


def tile_of(kind: str, tune: TuneParams, head_dim: int = 128) -> tuple[int, int, int]:
    """(block_n, stages, warps) of a decode tile kind (TILE_KINDS) at `head_dim` (tune_at_head_dim): one or two tiles
    per program in a shallow pipeline for short splits, longer tiles for a batch-filled launch, the long-context tile,
    or the base tile, which runs on decode_warps up to narrow_max_head_dim and on long_warps above it."""
    tune = tune_at_head_dim(tune, head_dim)
    if kind == "short":
        return tune.decode_short_block_n, tune.decode_short_stages, tune.decode_short_warps
    if kind == "filled":
        return tune.decode_block_n_large_batch, tune.decode_stages_large_batch, tune.decode_warps_large_batch
    if kind == "long":
        return tune.long_block_n, tune.long_stages, tune.long_warps
    return tune.decode_block_n, tune.decode_stages, (tune.decode_warps if head_dim <= tune.narrow_max_head_dim
                                                     else tune.long_warps)


def decode_prefetch(work_items: int, splits: int, tokens_per_split: int, long_tile: bool, sm_count: int,
                    tune: TuneParams, *, forced: bool = False) -> bool:
    """Does the per-sequence decode load each tile's page numbers an iteration ahead (TuneParams.page_prefetch)?
    Where a program's loop is long: the batch-filled and long-context tiles (2-stage pipelines, one K/V buffer either
    way: the page load leaves the loop's critical path) and base tiles over splits of prefetch_min_tokens or more
    (double-buffered), or over shorter splits where the launch has at most prefetch_max_programs_per_sm programs per
    SM. Not over shorter splits of more programs: there the second buffer (70 KB of shared memory per program instead
    of 38 KB at head dim 128) costs more programs per SM than the overlap gains, and blocks of sequences pay its
    prologue once per private tail."""
    if not tune.page_prefetch:
        return False
    kind = decode_tile_kind(work_items, splits, tokens_per_split, long_tile, sm_count, tune, forced=forced)
    few = work_items * splits <= tune.prefetch_max_programs_per_sm * sm_count
    return kind in ("filled", "long") or (kind == "base" and (tokens_per_split >= tune.prefetch_min_tokens or few))


def prefix_prefetch(rows: int, tune: TuneParams) -> bool:
    """Does the cascade's prefix pass load page numbers an iteration ahead? Where one row tile holds all its query rows
    (few programs: each program's own overlap is what hides the loads), not where several row tiles per KV head run
    (many programs per SM, the second buffer's shared memory costs more)."""
    return tune.page_prefetch and rows <= tune.prefix_max_block_m


def decode_splits(work_items: int, tokens: int, sm_count: int, block_n: int, tune: TuneParams) -> tuple[int, int]:
    """Split count and tokens per split of the per-sequence decode. choose_splits at the base target, then more
    splits (up to the long target) while each keeps long_min_tokens_per_split tokens. On the H200 the long target
    everywhere gained 10-29% where splits kept 1,000+ tokens (16 sequences x 8 KV heads at 4K-64K: 5 -> 9 splits)
    but lost 9% where they fell to ~300 tokens (8 x 8 at 4K: 9 -> 14) and 5-12% where a batch of >= 4 programs
    per SM was split in two (benchmarks/decode_vs_flashinfer.py grid, 2026-12-03)."""
    s0, t0 = choose_splits(work_items, tokens, sm_count, block_n, target_per_sm=tune.target_programs_per_sm,
                           min_tokens=decode_min_tokens(work_items, tokens, tune))
    if work_items >= tune.target_programs_per_sm * sm_count or tune.long_programs_per_sm <= tune.target_programs_per_sm:
        return s0, t0
    if tune.long_wave_ctas:
        s1, t1 = splits_filling_waves(work_items, tokens, sm_count, block_n, min_tokens=tune.long_min_tokens_per_split,
                                      target_per_sm=tune.long_programs_per_sm, ctas_per_sm=tune.long_wave_ctas)
    else:
        s1, t1 = choose_splits(work_items, tokens, sm_count, block_n, min_tokens=tune.long_min_tokens_per_split,
                               target_per_sm=tune.long_programs_per_sm)
    return (s1, t1) if s1 > s0 else (s0, t0)


def splits_filling_waves(work_items: int, tokens: int, sm_count: int, block_n: int, *, min_tokens: int,
                         target_per_sm: int, ctas_per_sm: int) -> tuple[int, int]:
    """Like choose_splits_waves, but judging each candidate by the launch it makes once its split is rounded up to
    whole tiles (with 128-token tiles, 49 splits of 32,896 tokens become 43 of 768: the wave it was picked to fill is
    gone); among launches within 2x of choose_splits' split count, the one that fills its last wave of
    `ctas_per_sm` resident programs per SM best, then the nearest to it."""
    s0, t0 = choose_splits(work_items, tokens, sm_count, block_n, min_tokens=min_tokens, target_per_sm=target_per_sm)
    max_splits = max(1, tokens // max(min_tokens, block_n))
    best = None
    for s in range(max(1, s0 // 2), min(max_splits, 2 * s0) + 1):
        real, tps = whole_tile_splits(tokens, s, block_n)
        x = work_items * real / (sm_count * ctas_per_sm)
        key = (round(x / math.ceil(x), 2), -abs(real - s0), -real)
        if best is None or key > best[0]:
            best = (key, (real, tps))
    return best[1] if best else (s0, t0)


def wave_splits(work_items: int, tokens: int, sm_count: int, block_n: int, *, min_tokens: int, ctas_per_sm: int,
                max_waves: int, max_splits: int,
                keep: Callable[[int, int], bool] | None = None) -> tuple[int, int] | None:
    """(splits, tokens per split) of whole block_n-token tiles, each split at least min_tokens (one split at least)
    and at most max_splits, whose programs take the fewest token-waves: waves of ctas_per_sm resident programs per SM
    (a partly filled last wave counted whole) times the tokens a program reads, plus one tile for its prologue and
    store; at most max_waves waves where that is above 0 (one split always qualifies), ties to fewer splits.
    keep(splits, tokens_per_split): a further condition on a candidate (the caller's tile kind). None where no
    candidate qualifies."""
    slots = ctas_per_sm * sm_count
    best = None
    for s in range(1, max(1, min(max_splits, tokens // max(min_tokens, block_n))) + 1):
        real, tps = whole_tile_splits(tokens, s, block_n)
        waves = ceil_div(work_items * real, slots)
        if (max_waves and waves > max_waves and real > 1) or (keep is not None and not keep(real, tps)):
            continue
        key = (waves * (tps + block_n), real)
        if best is None or key < best[0]:
            best = (key, (real, tps))
    return best[1] if best else None


def decode_fused_merge(splits: int, seqs: int, long_tile: bool, tune: TuneParams) -> bool:
    """Does a split per-sequence decode that owns its states merge them in its own programs (decode_fused_merge)?
    Where the tune has it, the launch forms no page blocks (seqs == 1), has 2 to fused_merge_max_splits splits and is
    not the long-context launch (unless fused_merge_long)."""
    return (tune.decode_fused_merge and seqs == 1 and 1 < splits <= tune.fused_merge_max_splits
            and (tune.fused_merge_long or not long_tile))


def fused_merge_slots(q_per_kv: int, head_dim: int, splits: int, warps: int) -> tuple[int, int]:
    """(MERGE_G, MERGE_S) of the decode's fused merge: a sequence's query rows padded to a power of two, and the
    slots it loads at once, a [MERGE_G, MERGE_S, head_dim] tile of at most 16 values per thread, so that the merge
    does not raise the kernel's register count above its tile loop's."""
    mg = 1 << max(0, q_per_kv - 1).bit_length()
    ms = max(1, min(1 << max(0, splits - 1).bit_length(), 16 * 32 * warps // (mg * head_dim)))
    return mg, ms


def decode_block_g(q_per_kv: int, seqs: int = 1) -> int:
    """Rows of the per-sequence decode's dot: a KV head's query heads, padded to the 16 rows a tensor-core tile has,
    or with page blocks of `seqs` sequences (SEQS) their rows together, padded to a power of two where they need
    more (two sequences of 9-16 query heads per KV head: wide_dot_block_n)."""
    return max(16, 1 << max(0, seqs * q_per_kv - 1).bit_length())


def prefix_block_m(rows: int, max_block_m: int) -> int:
    bm = 16
    while bm < rows and bm < max_block_m:
        bm *= 2
    return bm


def scale_log2(head_dim: int, sm_scale: float | None) -> float:
    return (sm_scale if sm_scale is not None else 1.0 / math.sqrt(head_dim)) * LOG2E


def stagger_block_n(head_dim: int, warps: int, tune: TuneParams) -> int:
    """The most tokens a tile of the staggered loads (decode_stagger) holds: a K tile of at most
    stagger_thread_elements elements per thread (a power of two, 16 at least: the dot's smallest N)."""
    tokens = max(tune.stagger_thread_elements * warps * 32 // head_dim, 16)
    return 1 << (tokens.bit_length() - 1)



GLUON_HEAD_DIMS = (64, 128)     # where decode_gluon's tile was timed (device-2026-12-08)
GLUON_MAX_Q_PER_KV = 16         # one MMA's M
GLUON_TILE = (128, 4)           # tokens, warps
# decode_gluon_wide: head dim 256 on transposed dots (gluon_decode's SWAP), which hold one MMA's N of query heads
GLUON_WIDE_HEAD_DIM = 256
GLUON_WIDE_MAX_Q_PER_KV = 8
GLUON_WIDE_TILE = (64, 4)


def gluon_decode_route(tune: TuneParams, *, kv_dtype: str, head_dim: int, q_per_kv: int, splits: int, seqs: int,
                       external_states: bool) -> bool:
    """Does this per-sequence decode launch run the Gluon decode (decode_gluon)? Only unsplit launches that write
    their own output, without page blocks, over a bf16 cache at a head dim its tile was timed at, or at head dim 256
    with at most 8 query heads per KV head where decode_gluon_wide asks for it."""
    narrow = head_dim in GLUON_HEAD_DIMS and q_per_kv <= GLUON_MAX_Q_PER_KV
    wide = tune.decode_gluon_wide and head_dim == GLUON_WIDE_HEAD_DIM and q_per_kv <= GLUON_WIDE_MAX_Q_PER_KV
    return (tune.decode_gluon and kv_dtype == "bf16" and (narrow or wide) and splits == 1 and seqs == 1
            and not external_states)


def gluon_decode_tile(head_dim: int) -> tuple[int, int, bool]:
    """The route's tile at this head dim: (tokens, warps, transposed dots)."""
    return (*GLUON_WIDE_TILE, True) if head_dim == GLUON_WIDE_HEAD_DIM else (*GLUON_TILE, False)
