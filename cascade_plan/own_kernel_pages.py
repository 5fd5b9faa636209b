"""The per-sequence decode over shared pages, on the host: page-aware blocks (which consecutive sibling sequences
paged_decode_kernel lets read the pages they share once), where a launch splits at a shared prefix's end so that its
first split forms them, and decode_launch, the launch DecodePlan makes from own_kernel_launch's splits and these
rules. Pure Python, as own_kernel_launch."""

from __future__ import annotations

from dataclasses import replace

from cascade_plan.own_kernel_launch import (
    ceil_div,
    decode_block_g,
    decode_launch_splits,
    decode_min_tokens,
    decode_tile,
    decode_tile_kind,
    longest_split_tokens,
    stream_splits,
    tune_at_head_dim,
    wave_splits,
    whole_tile_splits,
    wide_head,
)
from cascade_plan.own_kernel_tune import TuneParams


def tune_at_launch(tune: TuneParams, head_dim: int, shared_prefix_tokens: int | None, q_per_kv: int = 1,
                   work_items: int = 0, tokens: int = 0, sm_count: int = 0) -> TuneParams:
    """The tune a per-sequence decode launch of `work_items` (sequence, KV head) items over `tokens` at `head_dim`
    runs (tune_at_head_dim): over pages known to be private (shared_prefix_tokens 0) with the split target
    wide_head_private_programs_per_sm where the head dim is wide and the tune sets it, or its tiles of
    wide_head_stages stages where the tune caps them (wide_head_stages_max_tokens) and the launch on its own tiles is
    a base-tile one of splits that short; over a known shared prefix where one sequence's query heads fill the dot's
    16 rows (9-16 per KV head: blocks of two in the wide dot, on a long-context tile of wide_dot_block_n tokens or
    more, which head dim 256's 64-token one is not) with split targets of wide_dot_programs_per_sm and twice that for
    the long-context launch, where the tune sets it, (wide_dot_min_splits) its own launch is the long-context one in
    that many splits or more and (wide_dot_max_private_tokens) the private tail is that short."""
    tune = tune_at_head_dim(tune, head_dim)
    if shared_prefix_tokens == 0 and wide_head(tune, head_dim):
        if tune.wide_head_private_programs_per_sm:
            return replace(tune, target_programs_per_sm=tune.wide_head_private_programs_per_sm)
        if tune.wide_head_stages and tune.wide_head_stages_max_tokens and work_items > 0 and tokens > 0:
            splits, tps, long_tile = decode_launch_splits(work_items, tokens, sm_count, tune)
            if (tps <= tune.wide_head_stages_max_tokens
                    and decode_tile_kind(work_items, splits, tps, long_tile, sm_count, tune) == "base"):
                return tune_at_head_dim(replace(tune, wide_head_stages_max_tokens=0), head_dim)
    w = tune.wide_dot_programs_per_sm
    if w and shared_prefix_tokens and wide_dot_blocks(q_per_kv, tune.long_block_n, tune):
        # at these targets already (a tune this applied to, or one that has them), the key changes nothing
        if tune.wide_dot_min_splits and (tune.target_programs_per_sm, tune.long_programs_per_sm) != (w, 2 * w):
            if work_items <= 0 or tokens <= 0:      # a launch the caller did not give
                return tune
            splits, _, long_tile = decode_launch_splits(work_items, tokens, sm_count, tune)
            if not long_tile or splits < tune.wide_dot_min_splits:
                return tune
        cap = tune.wide_dot_max_private_tokens
        if cap and (tokens <= 0 or tokens - shared_prefix_tokens > cap):
            return tune
        return replace(tune, target_programs_per_sm=w, long_programs_per_sm=2 * w)
    return tune


def wide_head_stream_tune(tune: TuneParams, head_dim: int, shared_prefix_tokens: int | None, work_items: int,
                          tokens: int, sm_count: int) -> TuneParams:
    """The tune of a per-sequence decode launch at a wide head dim (tune: tune_at_launch's) that streams
    (decode_launch's streaming launch: the long-context launch over a known shared prefix of at most half the context,
    the batch within stream_max_programs_per_sm programs per SM): where the tune sets wide_head_stream_programs_per_sm,
    that streaming target on tiles of wide_head_stream_tile_n tokens in wide_head_stream_stages stages, loading page
    numbers ahead, provided the launch still streams on them; else `tune`. Applying it twice gives the same tune."""
    w = tune.wide_head_stream_programs_per_sm
    if not w or not wide_head(tune, head_dim) or work_items <= 0:
        return tune

    def streams(t: TuneParams) -> bool:
        long_tile = decode_launch_splits(work_items, tokens, sm_count, t)[2]
        return launch_streams(long_tile, work_items, tokens, shared_prefix_tokens, sm_count, t)

    if not streams(tune):
        return tune
    t = tune_at_head_dim(replace(tune, wide_head_stages=tune.wide_head_stream_stages,
                                 wide_head_tile_n=tune.wide_head_stream_tile_n, wide_head_stages_max_tokens=0,
                                 stream_programs_per_sm=w), head_dim)
    return t if streams(t) else tune


def launch_streams(long_tile: bool, work_items: int, tokens: int, shared_prefix_tokens: int | None, sm_count: int,
                   tune: TuneParams) -> bool:
    """Does a per-sequence decode launch outside the cascade's suffix pass take the streaming launch (stream_splits)
    instead of its long-context one: the tune has a streaming target, the launch's splits are long-context ones, a
    shared prefix is known and at most half the context, and the batch fits stream_max_programs_per_sm programs per
    SM?"""
    return (long_tile and bool(tune.stream_programs_per_sm) and shared_prefix_tokens is not None
            and 2 * shared_prefix_tokens <= tokens and work_items <= tune.stream_max_programs_per_sm * sm_count)


def tune_at_kv_dtype(tune: TuneParams, kv_dtype: str) -> TuneParams:
    """The tune a per-sequence decode over a `kv_dtype` cache ("bf16", "fp8") launches with: over fp8 the streaming
    launch's target fp8_stream_programs_per_sm where set (and as many resident per SM at most), no capped
    head-dim-256 stages (wide_head_stages_max_tokens: bf16's alone), and the batch-filled launch over private pages on
    the base tile where fp8_private_filled_base_tile (private_filled_base_tile: set over fp8 alone), and one split
    fewer over private pages down to floor_splits_min_programs_per_sm, not the lower private floor, and no
    head-dim-256 streaming target of its own (wide_head_stream_programs_per_sm: bf16's alone); else `tune`.
    Applying it twice gives the same tune."""
    if kv_dtype == "fp8" and tune.wide_head_stages and tune.wide_head_stages_max_tokens:
        tune = replace(tune, wide_head_stages=0)     # the capped head-dim-256 tiles are bf16's alone
    if kv_dtype == "fp8" and tune.wide_head_stream_programs_per_sm:
        tune = replace(tune, wide_head_stream_programs_per_sm=0)     # fp8 streams at fp8_stream_programs_per_sm
    if tune.private_filled_base_tile != (kv_dtype == "fp8" and tune.fp8_private_filled_base_tile):
        tune = replace(tune, private_filled_base_tile=not tune.private_filled_base_tile)
    if kv_dtype == "fp8" and tune.floor_splits_private_min_programs_per_sm:
        tune = replace(tune, floor_splits_private_min_programs_per_sm=0.0)   # fp8's private floor: the shared one's
    n = tune.fp8_stream_programs_per_sm
    if kv_dtype != "fp8" or not n:
        return tune
    return replace(tune, stream_programs_per_sm=n, stream_max_programs_per_sm=max(tune.stream_max_programs_per_sm, n))


def launch_shared_tokens(shared_prefix_tokens: int | None, sharing_seqs: int, tune: TuneParams) -> int | None:
    """The shared prefix a per-sequence decode's launch rules count (decode_launch's shared_prefix_tokens): none where
    fewer than two sequences share it and the tune says so (sibling_shared_only), else the caller's. sharing_seqs:
    how many consecutive sequences share it (a group's size)."""
    if tune.sibling_shared_only and sharing_seqs < 2 and shared_prefix_tokens is not None:
        return 0
    return shared_prefix_tokens


def shared_prefix_split(batch: int, q_per_kv: int, max_seq_len: int, shared_prefix_tokens: int | None,
                        tokens_per_split: int, block_n: int, tune: TuneParams) -> tuple[int, int] | None:
    """(splits, tokens per split) that end the first split at the shared prefix's last whole tile, where the tune asks
    for it (decode_shared_split), blocks can hold two or more sequences, the launch's first split (of block_n-token
    tiles) forms no block because it holds more private tokens than the prefix covers, and the new split count stays
    within shared_split_max (split_launch_shared_split_max where the launch was split); None where the launch stays
    as it is."""
    if not tune.decode_shared_split or not shared_prefix_tokens or shared_prefix_tokens >= max_seq_len:
        return None
    if page_group_seqs(batch, q_per_kv, tune) == 1 or tokens_per_split <= shared_prefix_tokens:
        return None
    if first_split_blocks(shared_prefix_tokens, max_seq_len, tokens_per_split, block_n):
        return None
    tps = (shared_prefix_tokens // tune.decode_block_n) * tune.decode_block_n
    most = max(tune.shared_split_max, tune.split_launch_shared_split_max if tokens_per_split < max_seq_len else 0)
    if tps == 0 or ceil_div(max_seq_len, tps) > most:
        return None
    return ceil_div(max_seq_len, tps), tps


def decode_launch(batch: int, kv_heads: int, q_per_kv: int, max_seq_len: int, shared_prefix_tokens: int | None,
                  sm_count: int, tune: TuneParams, *, head_dim: int = 128,
                  streaming: bool = True) -> tuple[int, int, bool]:
    """(splits, tokens per split, long tile?) of a per-sequence decode as DecodePlan launches it at `head_dim`
    (tune_at_launch): the streaming launch where it applies (not with `streaming` False: the cascade's suffix pass,
    which shares the GPU with its prefix pass), else decode_launch_splits' with the shared prefix split.
    shared_prefix_tokens: 0 over private pages, None where the caller does not know."""
    tune = tune_at_launch(tune, head_dim, shared_prefix_tokens, q_per_kv, batch * kv_heads, max_seq_len, sm_count)
    work = batch * kv_heads
    splits, tps, long_tile = decode_launch_splits(work, max_seq_len, sm_count, tune)
    if streaming and launch_streams(long_tile, work, max_seq_len, shared_prefix_tokens, sm_count, tune):
        return (*stream_splits(work, max_seq_len, sm_count, tune), False)
    filled = block_fill_splits(batch, kv_heads, q_per_kv, max_seq_len, shared_prefix_tokens, splits, sm_count, tune,
                               head_dim)
    if filled:
        return (*filled, False)
    block_n = decode_tile(work, splits, tps, long_tile, sm_count, tune)[0]
    at_prefix = (shared_prefix_split(batch, q_per_kv, max_seq_len, shared_prefix_tokens, tps, block_n, tune)
                 or shared_head_split(batch, kv_heads, q_per_kv, max_seq_len, shared_prefix_tokens, splits, tps,
                                      block_n, sm_count, tune))
    if at_prefix:
        return (*at_prefix, False)
    # not in the cascade's suffix pass: it shares the GPU with the prefix pass, so no wave of its own is whole
    waved = streaming and wide_head_waves(batch, kv_heads, q_per_kv, max_seq_len, splits, tps, long_tile,
                                          shared_prefix_tokens, sm_count, tune, head_dim)
    return (*waved, False) if waved else (splits, tps, long_tile)


def block_fill_splits(batch: int, kv_heads: int, q_per_kv: int, max_seq_len: int, shared_prefix_tokens: int | None,
                      splits: int, sm_count: int, tune: TuneParams, head_dim: int) -> tuple[int, int] | None:
    """(splits, tokens per split) that cut a known shared prefix of more than half the context into splits of whole
    base tiles, at least block_fill_min_tokens each, enough that the launch's blocks (page_group_seqs sequences each)
    give about block_fill_programs_per_sm working programs per SM and the launch target_programs_per_sm programs per
    SM in all (page_block_seqs' condition for blocks); the private rest follows in splits of the same length. Where
    the tune has it (TuneParams.block_fill_programs_per_sm, at head dims of at least block_fill_min_head_dim), the
    launch of `splits` falls short of target_programs_per_sm programs per SM (so no block forms), blocks can hold
    two or more sequences, and the new launch has more splits; else None."""
    work = batch * kv_heads
    if (not tune.block_fill_programs_per_sm or head_dim < tune.block_fill_min_head_dim
            or not shared_prefix_tokens or 2 * shared_prefix_tokens <= max_seq_len
            or work * splits >= tune.target_programs_per_sm * sm_count):
        return None
    seqs = page_group_seqs(batch, q_per_kv, tune)
    if seqs == 1:
        return None
    # at least target_programs_per_sm launched programs per SM, or page_block_seqs forms no block
    want = max(ceil_div(tune.block_fill_programs_per_sm * sm_count, (batch // seqs) * kv_heads),
               ceil_div(tune.target_programs_per_sm * sm_count, work))
    most = max(1, shared_prefix_tokens // max(tune.block_fill_min_tokens, tune.decode_block_n))
    _, tps = whole_tile_splits(shared_prefix_tokens, min(want, most), tune.decode_block_n)
    floor = max(tune.block_fill_min_tokens, tune.decode_block_n)
    shorter = bool(tune.block_fill_shorter_min_seqs) and seqs >= tune.block_fill_shorter_min_seqs
    while (shorter and work * ceil_div(max_seq_len, tps) < tune.target_programs_per_sm * sm_count
           and tps - tune.decode_block_n >= floor):
        tps -= tune.decode_block_n
    n = ceil_div(max_seq_len, tps)
    return (n, tps) if n > splits and work * n >= tune.target_programs_per_sm * sm_count else None


def wide_head_waves(batch: int, kv_heads: int, q_per_kv: int, tokens: int, splits: int, tokens_per_split: int,
                    long_tile: bool, shared_prefix_tokens: int | None, sm_count: int, tune: TuneParams,
                    head_dim: int) -> tuple[int, int] | None:
    """(splits, tokens per split) of a base-tile launch (with wide_head_wave_short, a base- or short-tile one) at a
    wide head dim over pages known to be private (or, where the tune says so, wide_head_wave_shared, over a known
    shared prefix where neither this launch nor the new one forms a page block), chosen so that its programs fill
    whole waves of wide_head_wave_ctas resident programs per SM (wave_splits; at most wide_head_wave_max waves where
    set), among launches that keep such a tile and at most the larger of its split count and fused_merge_max_splits
    splits (no merge kernel where there was none); None where the tune lacks the rule or the launch is another."""
    work_items = batch * kv_heads
    known = shared_prefix_tokens == 0 or (tune.wide_head_wave_shared and bool(shared_prefix_tokens))
    if (not tune.wide_head_wave_ctas or not known or long_tile or not wide_head(tune, head_dim) or work_items <= 0
            or tokens <= 0):
        return None

    kinds = ("base", "short") if tune.wide_head_wave_short else ("base",)

    def kept(s: int, tps: int) -> bool:
        if decode_tile_kind(work_items, s, longest_split_tokens(tokens, s, tps), False, sm_count, tune) not in kinds:
            return False
        return not shared_prefix_tokens or 1 == page_block_seqs(
            batch, q_per_kv, work_items * s, sm_count, tune, shared_prefix_tokens=shared_prefix_tokens,
            max_seq_len=tokens, tokens_per_split=tps, block_n=tune.decode_block_n)

    if not kept(splits, tokens_per_split):
        return None
    return wave_splits(work_items, tokens, sm_count, tune.decode_block_n,
                       min_tokens=decode_min_tokens(work_items, tokens, tune), ctas_per_sm=tune.wide_head_wave_ctas,
                       max_waves=tune.wide_head_wave_max, max_splits=max(splits, tune.fused_merge_max_splits),
                       keep=kept)


def shared_head_split(batch: int, kv_heads: int, q_per_kv: int, max_seq_len: int, shared_prefix_tokens: int | None,
                      splits: int, tokens_per_split: int, block_n: int, sm_count: int,
                      tune: TuneParams) -> tuple[int, int] | None:
    """(2, the shared prefix's whole tiles) for an unsplit launch over a known shared prefix whose split forms no
    block and that shared_prefix_split leaves as it is (equal splits at the prefix would be more than
    shared_split_max): a first split over the prefix, whose blocks read it once per block, and a last split over the
    rest, which paged_decode_kernel runs to each sequence's end. Where the tune has it (shared_head_min_tokens), the
    prefix's whole tiles (of the tile the launch runs) hold at least that many tokens, and the two-split launch still
    lets blocks form (page_block_seqs); else None."""
    if (not tune.shared_head_min_tokens or splits != 1 or not shared_prefix_tokens
            or shared_prefix_tokens >= max_seq_len or page_group_seqs(batch, q_per_kv, tune) == 1
            or first_split_blocks(shared_prefix_tokens, max_seq_len, tokens_per_split, block_n)):
        return None
    # the prefix's whole tiles of the tile the two-split launch runs (chosen by its longer, last split)
    work = batch * kv_heads
    tile = decode_tile(work, 2, max_seq_len - shared_prefix_tokens, False, sm_count, tune)[0]
    head = (shared_prefix_tokens // tile) * tile
    if head < tune.shared_head_min_tokens or 2 * head >= max_seq_len:
        return None
    seqs = page_block_seqs(batch, q_per_kv, work * 2, sm_count, tune, shared_prefix_tokens=shared_prefix_tokens,
                           max_seq_len=max_seq_len, tokens_per_split=head, block_n=tile)
    return (2, head) if seqs > 1 else None


def page_group_seqs(batch: int, q_per_kv: int, tune: TuneParams, block_n: int | None = None) -> int:
    """Sequences per page-aware block: the most (a power of two, at most tune.decode_page_group) whose query rows fit
    the dot's padded rows (or tune.wide_dot_seqs where one sequence's fill them, in a dot of that many times the rows,
    on a launch whose tile holds block_n >= tune.wide_dot_block_n tokens) and that divides the batch, so that every
    block is whole; 1 = no blocks."""
    wide = wide_dot_blocks(q_per_kv, block_n, tune)
    rows = decode_block_g(q_per_kv, tune.wide_dot_seqs) if wide else max(decode_block_g(q_per_kv),
                                                                         tune.decode_dot_rows)
    s = 1
    while 2 * s <= tune.decode_page_group and 2 * s * q_per_kv <= rows and batch % (2 * s) == 0:
        s *= 2
    return s


def wide_dot_blocks(q_per_kv: int, block_n: int | None, tune: TuneParams) -> bool:
    """Do blocks of tune.wide_dot_seqs sequences share a dot of that many times the rows (TuneParams.wide_dot_block_n):
    where one sequence's query heads fill the 16-row dot (9-16 per KV head) and the launch's tile holds block_n >=
    wide_dot_block_n tokens (None: unknown, no)?"""
    return (bool(tune.wide_dot_block_n) and block_n is not None and block_n >= tune.wide_dot_block_n
            and 2 * q_per_kv > decode_block_g(q_per_kv))


def split_groups(start: int, end: int, shared_prefix_tokens: int, block_n: int, seqs: int) -> bool:
    """Does paged_decode_kernel group a block of `seqs` sequences over the split [start, end)? Where the shared run
    from `start`, in whole tiles, holds at least the block's private tokens in that split together."""
    run = ((min(shared_prefix_tokens, end) - start) // block_n) * block_n
    return run > 0 and run >= seqs * (end - start - run)


def first_split_blocks(shared_prefix_tokens: int, max_seq_len: int, tokens_per_split: int, block_n: int) -> bool:
    """Would paged_decode_kernel form a block (of two sequences, its smallest) over a launch's first split? Every
    later split inside the shared prefix forms one whenever the first does, and none past it does, so the first
    split decides whether a block ever forms."""
    return split_groups(0, min(tokens_per_split, max_seq_len), shared_prefix_tokens, block_n, 2)


def floored_group_seqs(batch: int, q_per_kv: int, programs: int, sm_count: int, tune: TuneParams,
                       block_n: int | None) -> int:
    """page_group_seqs, halved until a launch of `programs` programs leaves page_block_min_programs_per_sm working
    programs per SM (a block's other programs exit)."""
    s = page_group_seqs(batch, q_per_kv, tune, block_n)
    floor = tune.page_block_min_programs_per_sm * sm_count
    while s > 1 and programs < s * floor:
        s //= 2
    return s


def page_block_seqs(batch: int, q_per_kv: int, programs: int, sm_count: int, tune: TuneParams, *,
                    shared_prefix_tokens: int | None, max_seq_len: int, tokens_per_split: int | None = None,
                    block_n: int | None = None) -> int:
    """SEQS of a per-sequence decode launch: page_group_seqs where blocks can pay, else 1 (the plain kernel).
    A block's first program reads its sequences' private tails one after another, and the block code costs the
    kernel registers even where no block forms; so on the H200 (probe 1.4 rows against 1.3's over the `all` grid)
    blocks lost up to 38% where the launch gave fewer than target_programs_per_sm programs per SM, and 10-19%
    where the shared run was shorter than a tail or nothing was shared. shared_prefix_tokens: the tokens the
    batch's consecutive sequences share at the start of their pages, as the caller knows it (an engine's common
    prefix; 0: private pages), None when not known (the kernel still finds blocks in the block table). Given the
    launch's split and tile (tokens_per_split, block_n), blocks only where the kernel would form one
    (first_split_blocks): on the H200 a launch with blocks allowed that formed none ran 10-15% slower than the plain
    kernel (256 sequences at a 1K or 4K prompt with as many private tokens: probe 1.4 rows against 1.3's)."""
    s = floored_group_seqs(batch, q_per_kv, programs, sm_count, tune, block_n)
    if s == 1 or shared_prefix_tokens == 0 or programs < tune.target_programs_per_sm * sm_count:
        return 1
    if shared_prefix_tokens is None:
        return s
    if tokens_per_split is not None and block_n is not None:
        return s if first_split_blocks(shared_prefix_tokens, max_seq_len, tokens_per_split, block_n) else 1
    return 1 if shared_prefix_tokens < max_seq_len - shared_prefix_tokens else s


# Page numbers per sequence the page-aware decode compares at a time (CHK). One value for every launch: each
# distinct constexpr is another compile of the kernel, and on the H200's default probe (probe 1.4) 43 of its 67
# paged_decode compiles (1.6-2.7 s each) differed only in CHK; with SEQS == 1 the kernel never reads it.
CHECK_CHUNK_PAGES = 128


def decode_fp8_pairs(work_items: int, splits: int, seqs: int, head_dim: int, sm_count: int, tune: TuneParams) -> bool:
    """Whether a per-sequence decode launch over an fp8 cache reads it as int16 pairs (TuneParams.fp8_pairs): everywhere
    without a cap, else where its working programs (a block's other programs exit: work_items x splits / seqs) are at
    most fp8_pairs_max_programs_per_sm per SM, at head dims up to fp8_pairs_max_head_dim. On an H100
    (benchmarks/raw/device-2026-12-06i/fp8-pairs.json) pairs everywhere ran 1.01-1.05x the converted tile at 1.9-2.2
    programs per SM over private pages (fp8 at 128K-256K: 0.94x FlashInfer's decode -> 0.98x) but 0.92-1.00x at 2.7
    per SM and more, and 0.94-0.99x at head dim 256. Capped at 2.25 per SM and head dim 128 (probe 1.13.0), it ran
    1.00-1.07x over private pages and 0.97-1.21x over shared ones on every decode row it changes, 10 held-out fp8
    shapes included (device-2026-12-06j: fp8-capped.json, next-rules.json)."""
    if not (tune.fp8_pairs and tune.fp8_dot_fp16):
        return False
    if tune.fp8_pairs_max_head_dim and head_dim > tune.fp8_pairs_max_head_dim:
        return False
    cap = tune.fp8_pairs_max_programs_per_sm
    return not cap or work_items * splits / max(seqs, 1) <= cap * sm_count
