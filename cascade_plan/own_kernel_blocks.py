"""Page blocks of the probe's Triton per-sequence decode, on the host: which blocks of consecutive sibling sequences a
launch (own_kernel_launch) lets paged_decode_kernel form, split by split, and the shared tokens each block reads once
for all its sequences. What a probe row records of its launch, and what the planner takes out of the decode's bytes.
Pure Python, as own_kernel_launch."""

from __future__ import annotations

from cascade_plan.own_kernel_launch import decode_fused_merge
from cascade_plan.own_kernel_pages import launch_shared_tokens, split_groups
from cascade_plan.own_kernel_plan import decode_launch_plan
from cascade_plan.own_kernel_tune import DEFAULT_TUNE, TuneParams


def page_blocks(batch: int, kv_heads: int, q_per_kv: int, group_size: int, shared_prefix_tokens: int, seq_len: int,
                sm_count: int, tune: TuneParams = DEFAULT_TUNE, *, head_dim: int = 128) -> dict:
    """The page blocks a per-sequence decode over shared pages forms, computed on the host: `batch` sequences of
    `seq_len` tokens each, in groups of `group_size` consecutive sequences whose first `shared_prefix_tokens` tokens
    are the same pages. What DecodePlan launches (splits, tile, page_block_seqs) and what paged_decode_kernel then
    chooses split by split: a split inside the shared prefix groups its aligned block (the largest size that fits in
    a group), a split straddling the prefix's end groups the largest block whose private tokens in it the shared run,
    in whole tiles, covers, and a split past it never does. Returns the launch record's fields: splits,
    tokens_per_split, page_block_seqs, page_prefetch and fused_merge (where the tune has them), and where blocks can
    form grouped_programs (the share of (sequence, KV head, split) programs whose shared pages a block read once) and
    mean_block_seqs (0 when none formed), as DecodePlan.launch_record writes them."""
    splits, tps, seqs, block_n, prefetch, long_tile = _decode_blocks_launch(batch, kv_heads, q_per_kv,
                                                                            group_size, shared_prefix_tokens,
                                                                            seq_len, sm_count, tune, head_dim)
    out: dict = {"splits": splits, "tokens_per_split": tps, "page_block_seqs": seqs}
    if tune.page_prefetch:      # recorded by tunes that have it (probe 1.6 on)
        out["page_prefetch"] = prefetch
    if tune.decode_fused_merge:  # (probe 1.7 on) whether the launch merges its own splits
        out["fused_merge"] = decode_fused_merge(splits, seqs, long_tile, tune)
    if seqs == 1:
        return out
    blocks = split_blocks(splits, tps, seqs, group_size, shared_prefix_tokens, seq_len, block_n)
    out["grouped_programs"] = len(blocks) / splits
    out["mean_block_seqs"] = sum(s for s, _ in blocks) / len(blocks) if blocks else 0.0
    return out


def split_block(start: int, end: int, seqs: int, group_size: int, shared_prefix_tokens: int, block_n: int) -> int:
    """The block paged_decode_kernel groups over the split [start, end): the largest size up to `seqs` that divides
    the group and whose private tokens in the split the shared run, in whole tiles, covers; 1 where none does."""
    if start >= shared_prefix_tokens or group_size < 2:
        return 1
    s = seqs
    while s >= 2 and not (group_size % s == 0 and split_groups(start, end, shared_prefix_tokens, block_n, s)):
        s //= 2
    return max(s, 1)


def split_programs(splits: int, tokens_per_split: int, seqs: int, group_size: int, shared_prefix_tokens: int,
                   seq_len: int, block_n: int) -> list[tuple[int, int, int]]:
    """Per split: (the block paged_decode_kernel groups there, 1 where none: split_block; the shared tokens the block
    reads once for its sequences, in whole tiles, 0 where none; the split's tokens)."""
    out = []
    for i in range(splits):    # the last split runs to the sequence's end (paged_decode_kernel)
        start = i * tokens_per_split
        end = seq_len if i == splits - 1 else min(start + tokens_per_split, seq_len)
        s = split_block(start, end, seqs, group_size, shared_prefix_tokens, block_n)
        run = ((min(shared_prefix_tokens, end) - start) // block_n) * block_n if s >= 2 else 0
        out.append((s, run, end - start))
    return out


def split_blocks(splits: int, tokens_per_split: int, seqs: int, group_size: int, shared_prefix_tokens: int,
                 seq_len: int, block_n: int) -> list[tuple[int, int]]:
    """(sequences in the block, shared tokens it reads once for all of them) of every split where
    paged_decode_kernel groups a block (split_programs)."""
    return [(s, run) for s, run, _ in split_programs(splits, tokens_per_split, seqs, group_size, shared_prefix_tokens,
                                                     seq_len, block_n) if s >= 2]


def longest_program_tokens(batch: int, kv_heads: int, q_per_kv: int, group_size: int, shared_prefix_tokens: int,
                           seq_len: int, sm_count: int, tune: TuneParams = DEFAULT_TUNE, *, head_dim: int = 128) -> int:
    """Tokens the busiest program of a per-sequence decode over shared pages streams: a grouped split's first program
    reads the block's shared run once and then each of its sequences' private tokens in the split, one after another;
    any other program its own split. Where no block forms, the launch's longest split."""
    splits, tps, seqs, block_n, _, _ = _decode_blocks_launch(batch, kv_heads, q_per_kv, group_size,
                                                             shared_prefix_tokens, seq_len, sm_count, tune, head_dim)
    return max(run + s * (n - run) for s, run, n in split_programs(splits, tps, seqs, group_size,
                                                                   shared_prefix_tokens, seq_len, block_n))


def block_saved_tokens(batch: int, kv_heads: int, q_per_kv: int, group_size: int, shared_prefix_tokens: int,
                       seq_len: int, sm_count: int, tune: TuneParams = DEFAULT_TUNE, *,
                       head_dim: int = 128) -> float:
    """Shared tokens per sequence that a per-sequence decode over shared pages does not read for that sequence,
    because its page block's first program read them once for the whole block: the sum over grouped splits of
    the block's shared run x (1 - 1 / sequences in the block). 0 where no block forms."""
    splits, tps, seqs, block_n, _, _ = _decode_blocks_launch(batch, kv_heads, q_per_kv, group_size,
                                                             shared_prefix_tokens, seq_len, sm_count, tune, head_dim)
    if seqs == 1:
        return 0.0
    blocks = split_blocks(splits, tps, seqs, group_size, shared_prefix_tokens, seq_len, block_n)
    return float(sum(run * (1 - 1 / s) for s, run in blocks))


def _decode_blocks_launch(batch: int, kv_heads: int, q_per_kv: int, group_size: int, shared_prefix_tokens: int,
                          seq_len: int, sm_count: int, tune: TuneParams,
                          head_dim: int) -> tuple[int, int, int, int, bool, bool]:
    """(splits, tokens per split, page_block_seqs, tile tokens, page prefetch, long-context launch?) of a
    per-sequence decode over shared pages at `head_dim`, as DecodePlan launches it (decode_launch_plan), the prefix
    counted as shared only as its groups share it (launch_shared_tokens)."""
    shared = launch_shared_tokens(shared_prefix_tokens, group_size, tune)
    la = decode_launch_plan(batch, kv_heads, q_per_kv, seq_len, shared, sm_count, tune, head_dim=head_dim)
    return la.splits, la.tokens_per_split, la.seqs, la.block_n, la.prefetch, la.long_tile
