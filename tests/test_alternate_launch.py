"""The alternating K/V half-step loop's tile (decode_alternate) by hand: own_kernel_launch.alternate_block_n and
alternate_tile, host arithmetic only."""

from __future__ import annotations

import dataclasses

import pytest

from cascade_plan.own_kernel_launch import alternate_block_n, alternate_tile
from cascade_plan.own_kernel_tune import DEFAULT_TUNE

ALTERNATE = dataclasses.replace(DEFAULT_TUNE, decode_alternate=True)


@pytest.mark.parametrize(("head_dim", "element_bytes", "block_n", "tile_bytes", "tokens"),
                         [(256, 2, 128, 32768, 64), (128, 2, 128, 32768, 128), (128, 2, 64, 32768, 64),
                          (64, 2, 128, 32768, 128), (256, 2, 128, 16384, 32), (256, 2, 128, 4096, 16),
                          (96, 2, 128, 32768, 128), (192, 2, 128, 32768, 64)])
def test_alternate_block_n_by_hand(head_dim, element_bytes, block_n, tile_bytes, tokens):
    """Tokens of a half-tile: at most alternate_block_n and alternate_tile_bytes / (head dim x element bytes), rounded
    down to a power of two, 16 at least (head dim 192: 85 tokens fit 32 KB, so 64)."""
    tune = dataclasses.replace(ALTERNATE, alternate_block_n=block_n, alternate_tile_bytes=tile_bytes)
    assert alternate_block_n(head_dim, element_bytes, tune) == tokens


@pytest.mark.parametrize(("launch_block_n", "head_dim", "stages", "tile"),
                         [(128, 128, 2, (128, 2, 4)), (64, 256, 2, (64, 2, 4)), (128, 256, 3, (64, 3, 4)),
                          (32, 128, 2, (32, 2, 4)), (64, 64, 3, (64, 3, 4))])
def test_alternate_tile_is_never_longer_than_the_launchs_and_runs_one_warpgroup(launch_block_n, head_dim, stages,
                                                                                 tile):
    """The launch's 32-token tile stays 32 (its splits are whole 32-token tiles); head dim 256's 128-token tile is cut
    to the 64 tokens a 32 KB half-tile holds; four warps and alternate_stages stages whatever the launch ran."""
    tune = dataclasses.replace(ALTERNATE, alternate_stages=stages)
    assert alternate_tile(launch_block_n, head_dim, 2, tune) == tile
