"""The per-sequence decode with its page arithmetic unsigned (decode_unsigned_pages) on the CPU, through Triton's
interpreter: a token's page and its place in it are the same numbers, so every launch gives the float32 reference's
result, over shared pages in blocks and private ones, split or not, page numbers loaded ahead or not, in lanes or
not, bf16 and fp8."""

from __future__ import annotations

import dataclasses

import pytest

from kernels_probe.interpret import enable_interpreter

if not enable_interpreter():  # triton was imported earlier in this process without the interpreter
    pytest.skip("triton already imported without TRITON_INTERPRET=1", allow_module_level=True)
torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from cascade_plan.own_kernel_tune import TuneParams  # noqa: E402
from kernels_probe.attention.data import build_data, reference_output  # noqa: E402
from kernels_probe.attention.grid import AttentionConfig  # noqa: E402
from kernels_probe.attention.reference import max_rel_err  # noqa: E402
from kernels_probe.attention.triton_plans import DecodePlan  # noqa: E402

TOL = 1e-2
# 32-token tiles on two warps (two lanes of 16 keys where decode_lanes), launch rules for 132 SMs
UNSIGNED = TuneParams(decode_block_n=32, decode_warps=2, decode_short_block_n=32, decode_short_warps=2,
                      decode_block_n_large_batch=32, decode_warps_large_batch=2, long_block_n=0, prefix_block_n=16,
                      min_tokens_per_split=16, decode_min_tokens_per_split=16, prefix_max_block_m=16,
                      page_block_min_programs_per_sm=0, decode_shared_split=False, decode_unsigned_pages=True)


@pytest.mark.parametrize("splits", [1, 3])
@pytest.mark.parametrize("prefetch", [True, False], ids=["prefetched", "loaded-in-loop"])
@pytest.mark.parametrize("lanes", [False, True], ids=["plain", "lanes"])
@pytest.mark.parametrize("kv_dtype", ["bf16", "fp8"])
def test_unsigned_page_arithmetic_matches_the_reference(splits, prefetch, lanes, kv_dtype):
    tune = dataclasses.replace(UNSIGNED, page_prefetch=prefetch, prefetch_min_tokens=0 if prefetch else 10**9,
                               decode_lanes=lanes)
    cfg = AttentionConfig(prefix_tokens=64, group_size=4, n_groups=2, suffix_tokens=8, q_per_kv=4, num_kv_heads=2,
                          head_dim=16, page_size=8, kv_dtype=kv_dtype)
    d = build_data(cfg, "cpu", seed=29)
    ref = reference_output(d)
    for table, shared in ((d.shared_table, 64), (d.dup_table, 0)):
        out = torch.full_like(d.q, float("nan"))
        plan = DecodePlan(d.q, d.k_cache, d.v_cache, table, d.seq_lens, 72, out, sm_count=2, tune=tune,
                          force_splits=splits, shared_prefix_tokens=shared)
        plan()
        assert plan.lanes == (2 if lanes else 1)
        assert max_rel_err(out, ref) < TOL, (table is d.shared_table, splits)
