"""The per-sequence decode in lanes (decode_lanes, triton_lanes) on the CPU, through Triton's interpreter: each warp
attends its own slice of every tile and the slices' states merge at the end of each token range. Whatever the split,
the page layout (blocks of sequences over shared pages, whose private tails mask rows), a range shorter than one tile
or ending inside one, the page numbers loaded ahead or not and the cache's dtype, the result is the float32
reference's."""

from __future__ import annotations

import dataclasses

import pytest

from kernels_probe.interpret import enable_interpreter

if not enable_interpreter():  # triton was imported earlier in this process without the interpreter
    pytest.skip("triton already imported without TRITON_INTERPRET=1", allow_module_level=True)
torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from decode_interpreter_support import SMALL_TILES, run_plan, small_config, wide_tiles  # noqa: E402

from kernels_probe.attention.data import build_data, reference_output  # noqa: E402
from kernels_probe.attention.reference import max_rel_err  # noqa: E402

TOL = 1e-2
LANES = dataclasses.replace(SMALL_TILES, decode_lanes=True)     # two lanes of 16 keys a 32-token tile


@pytest.mark.parametrize("splits", [1, 3, 5])
@pytest.mark.parametrize("q_per_kv", [4, 1])
@pytest.mark.parametrize("prefetch", [True, False], ids=["prefetched", "loaded-in-loop"])
@pytest.mark.parametrize("kv_dtype", ["bf16", "fp8"])
def test_lanes_over_shared_and_private_pages_match_the_reference(splits, q_per_kv, prefetch, kv_dtype):
    """72 tokens a sequence in 32-token tiles: unsplit, two full tiles and a tail of 8; in 3 splits of 32, 32 and 8;
    in 5 splits of 16, a range shorter than a tile where one lane sees no key. Over shared pages the 64-token prefix
    is read once per block of sequences and each private tail attends only its sequence's rows."""
    tune = dataclasses.replace(LANES, page_prefetch=prefetch, prefetch_min_tokens=0 if prefetch else 10**9)
    d = build_data(small_config(q_per_kv=q_per_kv, kv_dtype=kv_dtype), "cpu", seed=17)
    ref = reference_output(d)
    for table, shared in ((d.shared_table, 64), (d.dup_table, 0)):
        out, plan = run_plan(d, table, 72, tune, splits=splits, shared=shared)
        assert plan.lanes == 2 and plan.block_n == 32 and not plan.pairs
        assert max_rel_err(out, ref) < TOL, (table is d.shared_table, plan.splits, plan.seqs)
        if table is d.shared_table and splits == 1:
            assert plan.seqs > 1 and (plan.grouped > 0).any()     # blocks formed: the row-masked tails ran


def test_lanes_stay_off_where_a_slice_would_hold_fewer_than_16_keys_or_the_tune_leaves_them_off():
    d = build_data(small_config(), "cpu", seed=19)
    narrow = dataclasses.replace(LANES, decode_block_n=16, decode_short_block_n=16, decode_block_n_large_batch=16)
    _, plan = run_plan(d, d.dup_table, 72, narrow, splits=1, shared=0)
    assert plan.lanes == 1
    _, plan = run_plan(d, d.dup_table, 72, dataclasses.replace(LANES, decode_lanes=False), splits=1, shared=0)
    assert plan.lanes == 1


def test_four_lanes_at_head_dim_256_match_the_reference():
    """Four warps, a 64-token tile: four lanes of 16 keys over head dim 256, two query heads per KV head."""
    tune = wide_tiles(LANES)
    d = build_data(small_config(head_dim=256, q_per_kv=2, prefix_tokens=128, suffix_tokens=24), "cpu", seed=23)
    ref = reference_output(d)
    for table, shared in ((d.shared_table, 128), (d.dup_table, 0)):
        out, plan = run_plan(d, table, 152, tune, splits=None, shared=shared)
        assert plan.lanes == 4 and plan.block_n == 64
        assert max_rel_err(out, ref) < TOL
