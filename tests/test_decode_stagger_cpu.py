"""The per-sequence decode with the next tile's K and V in registers (decode_stagger, triton_stagger) on the CPU,
through Triton's interpreter: whatever the split, the page layout (blocks of sequences over shared pages, whose
private tails mask rows), a range shorter than one tile or ending inside one and the cache's dtype, the result is the
float32 reference's."""

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
STAGGER = dataclasses.replace(SMALL_TILES, decode_stagger=True)


@pytest.mark.parametrize("splits", [1, 3, 5])
@pytest.mark.parametrize("q_per_kv", [4, 1])
@pytest.mark.parametrize("kv_dtype", ["bf16", "fp8"])
def test_staggered_loads_over_shared_and_private_pages_match_the_reference(splits, q_per_kv, kv_dtype):
    """72 tokens a sequence in 32-token tiles: unsplit, two full tiles and a tail of 8; in 3 splits of 32, 32 and 8;
    in 5 splits of 16, a range shorter than a tile. Over shared pages the 64-token prefix is read once per block of
    sequences and each private tail attends only its sequence's rows."""
    d = build_data(small_config(q_per_kv=q_per_kv, kv_dtype=kv_dtype), "cpu", seed=29)
    ref = reference_output(d)
    for table, shared in ((d.shared_table, 64), (d.dup_table, 0)):
        out, plan = run_plan(d, table, 72, STAGGER, splits=splits, shared=shared)
        assert plan.stagger and plan.stages == 1 and plan.block_n == 32 and not plan.pairs
        assert max_rel_err(out, ref) < TOL, (table is d.shared_table, plan.splits, plan.seqs)
        if table is d.shared_table and splits == 1:
            assert plan.seqs > 1 and (plan.grouped > 0).any()     # blocks formed: the row-masked tails ran


def test_staggered_tiles_at_head_dim_256_are_cut_to_the_registers_they_may_hold():
    """Head dim 256 on four warps: a 64-token tile holds 128 of K's elements a thread, so the staggered launch runs
    32-token tiles (stagger_thread_elements 64); 152 tokens: four full tiles and a tail of 24."""
    tune = wide_tiles(STAGGER)
    d = build_data(small_config(head_dim=256, q_per_kv=2, prefix_tokens=128, suffix_tokens=24), "cpu", seed=31)
    ref = reference_output(d)
    for table, shared in ((d.shared_table, 128), (d.dup_table, 0)):
        out, plan = run_plan(d, table, 152, tune, splits=None, shared=shared)
        assert plan.stagger and plan.block_n == 32 and plan.warps == 4
        assert max_rel_err(out, ref) < TOL


def test_stagger_stays_off_where_the_tune_leaves_it_off_or_the_dots_are_not_plain():
    d = build_data(small_config(kv_dtype="fp8"), "cpu", seed=37)
    _, plan = run_plan(d, d.dup_table, 72, SMALL_TILES, splits=1, shared=0)
    assert not plan.stagger and plan.stages > 1
    pairs = dataclasses.replace(STAGGER, fp8_pairs=True, fp8_pairs_max_programs_per_sm=0.0, fp8_pairs_max_head_dim=0)
    out, plan = run_plan(d, d.dup_table, 72, pairs, splits=1, shared=0)
    assert plan.pairs and not plan.stagger
    assert max_rel_err(out, reference_output(d)) < TOL
