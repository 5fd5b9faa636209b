"""The decode kernel's K/V tiles are double-buffered by Triton's pipeliner where its page numbers are loaded an
iteration ahead (compiled for sm_90 on the CPU, in a process without the interpreter)."""

from __future__ import annotations

import functools
import importlib.util

import pytest
from compile_support import compiled_json

# only looked up, never imported here: importing triton in this process without TRITON_INTERPRET=1 would make the
# interpreter tests that run after this module in the same worker skip
if importlib.util.find_spec("triton") is None:
    pytest.skip("triton is not installed", allow_module_level=True)

# Our modules are imported outside the try: an error in them fails the test; only Triton's compile for sm_90 may be
# missing here (a skip).
SCRIPT = """
import json
import kernels_probe.attention.triton_jit
from kernels_probe.attention.pipelining import decode_pipeline
try:
    r = {str(pf): decode_pipeline(64, 3, 2, prefetch=pf) for pf in (False, True)}
    r["fp8"] = decode_pipeline(64, 3, 2, prefetch=True, kv_dtype="fp8")
    r["fp8-pairs"] = decode_pipeline(64, 3, 2, prefetch=True, kv_dtype="fp8-pairs")
    r["wide"] = {str(n): decode_pipeline(128, 2, 4, prefetch=True, seqs=n, q_per_kv=12) for n in (1, 2)}
    r["uindex"] = {str(u): decode_pipeline(64, 2, 4, prefetch=True, q_per_kv=2, head_dim=256, uindex=u)
                   for u in (False, True)}
    r["halves"] = decode_pipeline(32, 3, 4, prefetch=True, q_per_kv=2, head_dim=256, halves=True)
    r["lanes"] = decode_pipeline(64, 3, 2, prefetch=True, lanes=2)
    r["stagger"] = {str(d): decode_pipeline(8192 // d, 1, 4, prefetch=True, q_per_kv=2, head_dim=d, uindex=True,
                                            stagger=True) for d in (128, 256)}
except Exception as exc:
    r = {"skip": f"{type(exc).__name__}: {exc}"[:300]}
print(json.dumps(r))
"""


@functools.cache
def _compiled() -> dict:
    """The compiles SCRIPT makes, once per test process (a subprocess without the interpreter)."""
    return compiled_json(SCRIPT, "the decode")


def test_prefetched_pages_double_buffer_the_base_tile():
    r = _compiled()
    assert r["True"]["kv_buffers"] == 2, r
    assert 2 in r["True"]["waits"]          # the loop waits for one tile while the next is in flight
    # page numbers loaded in the iteration that uses them leave one buffer (Triton 3.6-3.9); a later Triton that
    # double-buffers them too would be good news, not a failure
    assert r["False"]["kv_buffers"] <= r["True"]["kv_buffers"]
    assert r["True"]["shared_bytes"] > r["False"]["shared_bytes"] or r["False"]["kv_buffers"] == 2
    # the cubin's registers per thread, where Triton ships its cuobjdump: within what a thread can hold
    for pf in ("False", "True"):
        regs = r[pf]["registers"]
        assert regs is None or 32 <= regs <= 255, r
        assert r[pf]["resident"]["by_shared"] == (227 * 1024) // r[pf]["shared_bytes"]


def test_an_fp8_cache_compiles_to_tiles_of_half_the_shared_memory():
    """The fp8 base tile (one byte a value, widened to fp16 for the dots) double-buffers as the bf16 one does, in
    less shared memory; its registers and spill stack are read from its cubin."""
    r = _compiled()
    fp8, bf16 = r["fp8"], r["True"]
    assert fp8["kv_buffers"] == 2 and 2 in fp8["waits"]
    assert fp8["shared_bytes"] < 0.6 * bf16["shared_bytes"], r
    assert fp8["registers"] is None or 32 <= fp8["registers"] <= 255
    assert fp8["stack_bytes"] is None or fp8["stack_bytes"] >= 0
    assert set(fp8["operand_loads"]) == {"ldmatrix", "ld.shared"}


def test_fp8_read_as_int16_pairs_leaves_shared_memory_by_ldmatrix():
    """fp8 read as int16 pairs of head dims (fp8_pairs): the same bytes of shared memory as the converted fp8 tile,
    double-buffered, but its K and V reach the dots through ldmatrix where the converted tile's go value by value
    (scalar ld.shared): the point of the layout."""
    r = _compiled()
    pairs, fp8 = r["fp8-pairs"], r["fp8"]
    assert pairs["kv_buffers"] == 2 and pairs["shared_bytes"] == fp8["shared_bytes"], r
    assert pairs["operand_loads"]["ldmatrix"] > 2 * fp8["operand_loads"]["ldmatrix"], r
    assert pairs["operand_loads"]["ld.shared"] < fp8["operand_loads"]["ld.shared"] / 4, r


def test_an_unknown_kv_dtype_is_refused_before_any_compile():
    from kernels_probe.attention.pipelining import compile_decode

    with pytest.raises(ValueError, match="kv_dtype"):
        compile_decode(64, 3, 2, prefetch=True, kv_dtype="fp16")


def test_resident_programs_round_each_warps_registers_up_to_the_allocation_unit():
    """226 registers x 32 threads round up to 7,424 per warp (29 units of 256), so four-warp programs fit twice in
    65,536 (three would need 89,088); 216 at two warps: 6,912 per warp, four programs (5 need 69,120)."""
    from kernels_probe.attention.pipelining import resident_programs

    assert resident_programs(226, 4, 76_032) == {"by_registers": 2, "by_shared": 3}
    assert resident_programs(216, 2, 39_116) == {"by_registers": 4, "by_shared": 5}
    assert resident_programs(255, 4, 141_312) == {"by_registers": 2, "by_shared": 1}
    assert resident_programs(None, 4, 76_032)["by_registers"] is None


def test_blocks_of_two_compile_the_32_row_dot_the_launch_runs():
    """Two sequences of 12 query heads share a 32-row dot (decode_block_g(12, 2)), as DecodePlan launches them: its
    query tile and scores take more shared memory and registers than one sequence's 16-row dot."""
    r = _compiled()["wide"]
    assert r["2"]["shared_bytes"] > r["1"]["shared_bytes"], r
    assert r["1"]["registers"] is None or r["2"]["registers"] > r["1"]["registers"], r


def test_unsigned_page_arithmetic_shortens_head_dim_256s_loop():
    """decode_unsigned_pages: each thread of head dim 256's 64-token tile computes 16 rows' page and place in it per
    tile; unsigned, a power-of-two page size makes each a shift or a mask (688 -> 496 PTX instructions in the loop
    under Triton 3.9). The same tile otherwise: shared memory, and registers within a few."""
    r = _compiled()
    if "skip" in r:
        pytest.skip(r["skip"])
    signed, unsigned = r["uindex"]["False"], r["uindex"]["True"]
    assert 0 < unsigned["loop_instructions"] < 0.85 * signed["loop_instructions"]
    assert unsigned["shared_bytes"] == signed["shared_bytes"]
    assert abs(unsigned["registers"] - signed["registers"]) <= 8


def test_tiles_in_halves_and_in_lanes_count_their_buffers():
    """Dots over halves of the head dims pipeline [buffers, keys, dims / 2] tiles and lanes [buffers, lanes, keys /
    lanes, dims]: both double-buffered here, as the base tile is (counted 0 when only [buffers, keys, dims] was
    read)."""
    r = _compiled()
    assert r["halves"]["kv_buffers"] == 2, r["halves"]
    assert r["lanes"]["kv_buffers"] == 2, r["lanes"]


def test_staggered_loads_run_without_the_pipeliner_and_spill_nothing_at_64_elements_a_thread():
    """decode_stagger launches one stage: K and V are the loop's own loads into registers, so the pipeliner makes no
    shared-memory K/V buffers and no async waits; on tiles of 64 of K's elements a thread (head dim 128: 64 tokens,
    256: 32 on four warps; stagger_thread_elements) ptxas spills nothing (Triton 3.9)."""
    r = _compiled()
    for d, got in r["stagger"].items():
        assert got["kv_buffers"] == 0 and got["waits"] == [], (d, got)
        assert got["stack_bytes"] in (None, 0), (d, got)
        assert got["mma"]["mma.sync"] > 0


def test_kv_tile_buffers_reads_only_the_pipeliners_tiles_of_that_size():
    from kernels_probe.attention.pipelining import kv_tile_buffers

    ir = """
    %0 = ttg.local_alloc : () -> !ttg.memdesc<2x64x128xbf16, #shared, #smem, mutable> loc(#loc1)
    %1 = ttg.local_alloc : () -> !ttg.memdesc<3x4x16x128xbf16, #shared, #smem, mutable> loc(#loc2)
    %2 = ttg.local_alloc : () -> !ttg.memdesc<2x64x64xi16, #shared, #smem, mutable> loc(#loc3)
    %3 = ttg.local_alloc %q : (tensor<64x128xbf16, #blocked>) -> !ttg.memdesc<64x128xbf16, #shared, #smem> loc(#l4)
    %4 = ttg.local_alloc : () -> !ttg.memdesc<2x16x128xbf16, #shared, #smem, mutable> loc(#loc5)
    """
    assert kv_tile_buffers(ir, 64 * 128) == [2, 3]
    assert kv_tile_buffers(ir, 64 * 64) == [2]
    assert kv_tile_buffers(ir, 128 * 128) == []
