"""The per-sequence decode with each tile's K and V as alternating half-steps (decode_alternate, triton_alternate) on
the CPU, through Triton's interpreter: whatever the split, the page layout (blocks of sequences over shared pages,
whose private tails mask rows), a range shorter than one tile or ending inside one, the result is the float32
reference's; an fp8 cache, and a launch whose dots are not plain, keep the default loop."""

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
ALTERNATE = dataclasses.replace(SMALL_TILES, decode_alternate=True)


@pytest.mark.parametrize("splits", [1, 3, 5])
@pytest.mark.parametrize("q_per_kv", [4, 1])
def test_alternating_half_steps_over_shared_and_private_pages_match_the_reference(splits, q_per_kv):
    """72 tokens a sequence in 32-token tiles: unsplit, two full tiles and one masked to 8 tokens (six half-steps); in
    3 splits of 32, 32 and 8; in 5 splits of 16, ranges shorter than a tile (one masked tile). Over shared pages the
    64-token prefix is read once per block of sequences and each private tail attends only its sequence's rows."""
    d = build_data(small_config(q_per_kv=q_per_kv), "cpu", seed=41)
    ref = reference_output(d)
    for table, shared in ((d.shared_table, 64), (d.dup_table, 0)):
        out, plan = run_plan(d, table, 72, ALTERNATE, splits=splits, shared=shared)
        assert plan.alternate and plan.warps == 4 and plan.stages == 2 and plan.block_n == 32
        assert max_rel_err(out, ref) < TOL, (table is d.shared_table, plan.splits, plan.seqs)
        if table is d.shared_table and splits == 1:
            assert plan.seqs > 1 and (plan.grouped > 0).any()     # blocks formed: the row-masked tails ran


@pytest.mark.parametrize("stages", [2, 3])
def test_alternating_tiles_at_head_dim_256_are_cut_to_the_half_tile_bytes(stages):
    """Head dim 256 in bf16: half-tiles of at most 16 KB hold 32 tokens, so a launch of 64-token tiles runs 32-token
    ones; 152 tokens: four full tiles and one masked to 24 tokens (ten half-steps)."""
    tune = dataclasses.replace(wide_tiles(ALTERNATE), alternate_tile_bytes=16384, alternate_stages=stages)
    d = build_data(small_config(head_dim=256, q_per_kv=2, prefix_tokens=128, suffix_tokens=24), "cpu", seed=43)
    ref = reference_output(d)
    for table, shared in ((d.shared_table, 128), (d.dup_table, 0)):
        out, plan = run_plan(d, table, 152, tune, splits=None, shared=shared)
        assert plan.alternate and plan.block_n == 32 and plan.stages == stages
        assert max_rel_err(out, ref) < TOL


def test_alternate_stays_off_over_fp8_where_the_tune_leaves_it_off_or_staggered_loads_run():
    d = build_data(small_config(kv_dtype="fp8"), "cpu", seed=47)
    out, plan = run_plan(d, d.dup_table, 72, ALTERNATE, splits=1, shared=0)
    assert not plan.alternate and plan.block_n == 32
    assert max_rel_err(out, reference_output(d)) < TOL
    d = build_data(small_config(), "cpu", seed=53)
    _, plan = run_plan(d, d.dup_table, 72, SMALL_TILES, splits=1, shared=0)
    assert not plan.alternate and plan.warps == 2
    _, plan = run_plan(d, d.dup_table, 72, dataclasses.replace(ALTERNATE, decode_stagger=True), splits=1, shared=0)
    assert plan.stagger and not plan.alternate
