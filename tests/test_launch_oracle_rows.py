"""benchmarks/decode_launch_oracle.py's search, on the host: the rows it searches are the probe grids' own shapes
(a list named "-held" holds held-out shapes, none of them the grids'), and each forced page-block cap launches the
blocks it names (own_kernel_plan.decode_launch_plan)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import decode_launch_oracle as oracle  # noqa: E402

from cascade_plan.own_kernel_pages import decode_fp8_pairs  # noqa: E402
from cascade_plan.own_kernel_plan import decode_launch_plan  # noqa: E402
from cascade_plan.own_kernel_tune import DEFAULT_TUNE  # noqa: E402
from kernels_probe.attention.grid import build_grid, coverage_grid, regimes_grid  # noqa: E402


def test_the_rows_searched_are_probe_grid_shapes():
    grid = set(build_grid()[0]) | set(coverage_grid()) | set(regimes_grid())
    for name, (rows, _, _) in oracle.ROW_LISTS.items():
        for cfg, layouts in rows():
            assert (cfg in grid) != name.endswith("-held"), (name, cfg.label())
            assert set(layouts) <= {"shared_table", "dup_table"}


@pytest.mark.parametrize(("q_per_kv", "kv_heads", "cap", "seqs"),
                         [(7, 4, 1, 1), (7, 4, 2, 2), (7, 4, 4, 4), (7, 4, 8, 8), (16, 2, 8, 4), (1, 40, 8, 8)])
def test_a_forced_block_cap_launches_blocks_of_that_many(q_per_kv, kv_heads, cap, seqs):
    # 128 sequences (8 for one KV head each of 40) over 1K shared + 128 private tokens, two splits of 64-token tiles:
    # both splits hold more shared run than their private tokens together, so the kernel forms every block
    batch = 8 if kv_heads == 40 else 128
    tune = oracle.forced_tune(DEFAULT_TUNE, oracle.TILES["64/3/2"], cap)
    la = decode_launch_plan(batch, kv_heads, q_per_kv, 1152, 1024, 132, tune, force_splits=2)
    assert (la.splits, la.tokens_per_split, la.block_n, la.seqs) == (2, 576, 64, seqs)


def test_without_a_cap_the_default_block_rule_decides():
    tune = oracle.forced_tune(DEFAULT_TUNE, oracle.TILES["64/3/2 np"])
    la = decode_launch_plan(128, 4, 7, 1152, 1024, 132, tune, force_splits=2)
    assert (la.seqs, la.prefetch) == (2, False)
    assert oracle.split_candidates(2, 512, 1152, 132)[0] == 1


@pytest.mark.parametrize("label", sorted({**oracle.TILES_D256, **oracle.TILES_D256_WIDE}))
def test_head_dim_256s_forced_tiles_launch_as_named(label):
    # 64 sequences x 4 KV heads over 4K + 128 private tokens at head dim 256, forced into two splits: the tile named,
    # page numbers loaded in the loop (tune_at_head_dim keeps the base tile at 256 and never prefetches there), and
    # an fp8 cache read as pairs exactly where the tile says so (the default's cap would refuse head dim 256)
    tile = oracle.ALL_TILES[label]
    bn, st, w, _, *pairs = tile
    tune = oracle.forced_tune(DEFAULT_TUNE, tile)
    la = decode_launch_plan(64, 4, 2, 4224, 0, 132, tune, head_dim=256, force_splits=2)
    assert (la.splits, la.block_n, la.stages, la.warps, la.prefetch) == (2, bn, st, w, False)
    assert decode_fp8_pairs(64 * 4, 2, 1, 256, 132, tune) == bool(pairs and pairs[0])


@pytest.mark.parametrize("label", sorted(oracle.TILES_WIDE))
def test_head_dim_128s_wide_tiles_launch_as_named(label):
    # 8 sequences x 8 KV heads at 4K + 128 private tokens, forced into 9 splits: the tile named, prefetching
    tile = oracle.ALL_TILES[label]
    bn, st, w, pf, *pairs = tile
    tune = oracle.forced_tune(DEFAULT_TUNE, tile)
    la = decode_launch_plan(8, 8, 5, 4224, 0, 132, tune, force_splits=9)
    assert (la.splits, la.block_n, la.stages, la.warps, la.prefetch) == (9, bn, st, w, pf)
    assert decode_fp8_pairs(8 * 8, 9, 1, 128, 132, tune) == bool(pairs and pairs[0])


def test_row_lists_name_their_tiles():
    for name, (_, tiles, _) in oracle.ROW_LISTS.items():
        assert set(tiles) <= set(oracle.ALL_TILES), name


@pytest.mark.parametrize("label", sorted(oracle.TILES_D256_AHEAD))
def test_head_dim_256s_tiles_ahead_prefetch_as_named(label):
    # the same rows as test_head_dim_256s_forced_tiles_launch_as_named, but page numbers loaded an iteration ahead:
    # wide_head_stages lets head dim 256 prefetch, on the tile named
    tile = oracle.ALL_TILES[label]
    bn, st, w, pf, _, ahead = tile
    assert pf and ahead
    tune = oracle.forced_tune(DEFAULT_TUNE, tile)
    la = decode_launch_plan(64, 4, 2, 4224, 0, 132, tune, head_dim=256, force_splits=2)
    assert (la.splits, la.block_n, la.stages, la.warps, la.prefetch) == (2, bn, st, w, True)
    # over a shared prefix in forced page blocks too
    capped = oracle.forced_tune(DEFAULT_TUNE, tile, 4)
    la = decode_launch_plan(64, 4, 2, 1536, 512, 132, capped, head_dim=256, force_splits=1)
    assert (la.block_n, la.stages, la.prefetch) == (bn, st, True)
