"""The probe's Triton cascade prefix pass, launched on the host: its row tile, its splits along the prefix, and the
work its busiest program streams, which bounds the pass where it has few programs. One level of the cascade (a
prefix shared by groups of sequences) per call. Pure Python, as own_kernel_launch."""

from __future__ import annotations

import math

from cascade_plan.own_kernel_launch import ceil_div, choose_splits, prefix_block_m, whole_tile_splits
from cascade_plan.own_kernel_tune import DEFAULT_TUNE, TuneParams

# program_tile_tokens' unit: a token streamed by a program of 64 query rows
TILE_ROWS_UNIT = 64


def choose_splits_waves(work_items: int, tokens: int, sm_count: int, block_n: int, *, min_tokens: int,
                        target_per_sm: int, ctas_per_sm: int = 1) -> tuple[int, int]:
    """Like choose_splits, but among split counts within 2x of the target it takes the one whose program count
    fills its last wave best (wave quantization: on the H200, 320 prefix programs of one per SM ran 20% slower
    than 256 or 512 at B=256, P=4096)."""
    s0, _ = choose_splits(work_items, tokens, sm_count, block_n, min_tokens=min_tokens, target_per_sm=target_per_sm)
    max_splits = max(1, tokens // max(min_tokens, block_n))
    best = None
    for s in range(max(1, s0 // 2), min(max_splits, 2 * s0) + 1):
        x = work_items * s / (sm_count * ctas_per_sm)
        eff = x / math.ceil(x)
        key = (round(eff, 2), -abs(s - s0), -s)
        if best is None or key > best[0]:
            best = (key, s)
    return whole_tile_splits(tokens, best[1] if best else s0, block_n)


def prefix_launch(seqs_per_group: int, q_per_kv: int, kv_heads: int, n_groups: int, prefix_tokens: int,
                  sm_count: int, tune: TuneParams = DEFAULT_TUNE) -> tuple[int, int, int, int]:
    """(row tile, row tiles per KV head and group, splits, tokens per split) of one prefix level as PrefixPlan
    launches it: a group's query rows (sequences x query heads per KV head) in tiles of 16-128 rows, split along the
    prefix for tune.prefix_programs_per_sm programs per SM, the last wave filled (choose_splits_waves)."""
    rows = seqs_per_group * q_per_kv
    bm = prefix_block_m(rows, tune.prefix_max_block_m)
    m_tiles = ceil_div(rows, bm)
    splits, tps = choose_splits_waves(m_tiles * kv_heads * n_groups, prefix_tokens, sm_count, tune.prefix_block_n,
                                      min_tokens=tune.min_tokens_per_split, target_per_sm=tune.prefix_programs_per_sm)
    return bm, m_tiles, splits, tps


def program_tile_tokens(seqs_per_group: int, q_per_kv: int, kv_heads: int, n_groups: int, prefix_tokens: int,
                        sm_count: int, tune: TuneParams = DEFAULT_TUNE) -> float:
    """The busiest program's work in one prefix level: the tokens of its split x its row tile / TILE_ROWS_UNIT. Its
    time per token grows with both: on an H100 (probe 1.8.0, splits of 256 tokens) the pass took 16.4-18.3 us with
    128-row tiles and 11.1 us with 64-row ones, at 4 to 32 programs."""
    bm, _, _, tps = prefix_launch(seqs_per_group, q_per_kv, kv_heads, n_groups, prefix_tokens, sm_count, tune)
    return min(tps, prefix_tokens) * bm / TILE_ROWS_UNIT
