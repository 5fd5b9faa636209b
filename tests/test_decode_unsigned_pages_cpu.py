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

from decode_interpreter_support import SMALL_TILES, run_plan, small_config  # noqa: E402

from kernels_probe.attention.data import build_data, reference_output  # noqa: E402
from kernels_probe.attention.reference import max_rel_err  # noqa: E402

TOL = 1e-2
UNSIGNED = dataclasses.replace(SMALL_TILES, decode_unsigned_pages=True)


@pytest.mark.parametrize("splits", [1, 3])
@pytest.mark.parametrize("prefetch", [True, False], ids=["prefetched", "loaded-in-loop"])
@pytest.mark.parametrize("lanes", [False, True], ids=["plain", "lanes"])
@pytest.mark.parametrize("kv_dtype", ["bf16", "fp8"])
def test_unsigned_page_arithmetic_matches_the_reference(splits, prefetch, lanes, kv_dtype):
    tune = dataclasses.replace(UNSIGNED, page_prefetch=prefetch, prefetch_min_tokens=0 if prefetch else 10**9,
                               decode_lanes=lanes)
    d = build_data(small_config(kv_dtype=kv_dtype), "cpu", seed=29)
    ref = reference_output(d)
    for table, shared in ((d.shared_table, 64), (d.dup_table, 0)):
        out, plan = run_plan(d, table, 72, tune, splits=splits, shared=shared)
        assert plan.lanes == (2 if lanes else 1)
        assert max_rel_err(out, ref) < TOL, (table is d.shared_table, splits)
