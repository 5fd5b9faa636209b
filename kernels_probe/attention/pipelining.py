"""How Triton pipelines the per-sequence decode kernel, read from its compiled IR without a GPU: the shared memory a
launch takes and how many buffers its K and V tiles get (1: each tile is loaded after the previous tile's math and
waited for before its own, so no load overlaps the math of its program; 2 or more: double-buffered), and the
registers per thread its cubin asks for (Triton's own cuobjdump), hence how many of its programs an SM holds, and how
its dots' operands leave shared memory (ldmatrix, or scalar loads where an fp8 tile is widened on the way), over a
bf16 cache and an fp8 one, converted or read as int16 pairs of head dims (TuneParams.fp8_pairs).

    python -m kernels_probe.attention.pipelining    # a table for the launches the default tune makes, and the
                                                    # transposed dots' (decode_swap_ab, four warps)

Compiles for sm_90 with Triton's own ptxas (no driver needed); must run without TRITON_INTERPRET."""

from __future__ import annotations

import re
import sys

from cascade_plan.own_kernel_launch import decode_block_g, fused_merge_slots
from cascade_plan.own_kernel_pages import CHECK_CHUNK_PAGES


def compile_decode(block_n: int, stages: int, warps: int, *, prefetch: bool, seqs: int = 1, head_dim: int = 128,
                   q_per_kv: int = 4, fused_merge: bool = True, splits: int = 8, arch: int = 90,
                   kv_dtype: str = "bf16", swap_ab: bool = False, l2_hints: int = 0,
                   halves: bool = False, maxnreg: int | None = None, lanes: int = 1, uindex: bool = False,
                   stagger: bool = False):
    """paged_decode_kernel compiled for one launch shape of a split decode over a bf16 or fp8 (e4m3, its dots in fp16:
    fp8_dot_fp16) cache, or an fp8 one read as int16 pairs ("fp8-pairs": fp8_pairs), as DecodePlan launches it (with
    its fused merge unless fused_merge is False or it forms page blocks), its dots transposed where swap_ab
    (decode_swap_ab), its K/V loads hinted to L2 as l2_hints says (decode_l2_hints), its dots over halves of the head
    dims where halves (wide_head_halves), in `lanes` lanes (decode_lanes), its page arithmetic unsigned where uindex
    (decode_unsigned_pages), its next tile's K and V in registers where stagger (decode_stagger)."""
    if kv_dtype not in KV_POINTER_TYPES:
        raise ValueError(f"kv_dtype must be one of {sorted(KV_POINTER_TYPES)}, got {kv_dtype!r}")
    if swap_ab and kv_dtype == "fp8-pairs":
        raise ValueError("transposed dots read an fp8 cache as it is, not as int16 pairs")
    import triton
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from kernels_probe.attention.triton_jit import paged_decode_kernel

    names = ["q_ptr", "k_ptr", "v_ptr", "bt_ptr", "seq_lens_ptr", "o_state_ptr", "lse_state_ptr", "out_ptr",
             "grouped_ptr", "counter_ptr", "sm_scale_log2", "stride_bt", "stride_kp", "stride_kt", "stride_kh",
             "rows_total", "slot_offset", "tokens_per_split", "keep_tokens"]
    cache = KV_POINTER_TYPES[kv_dtype]
    types = ["*bf16", cache, cache] + ["*i32"] * 2 + ["*fp32", "*fp32", "*bf16", "*i8", "*i32", "fp32"] + ["i32"] * 8
    signature: dict = dict(zip(names, types))
    # the constants DecodePlan.launch_partial passes
    fused_merge = fused_merge and seqs == 1      # decode_fused_merge: never with page blocks
    merge_g, merge_s = fused_merge_slots(q_per_kv, head_dim, splits, warps) if fused_merge else (1, 1)
    const = dict(HKV=8, G=q_per_kv, BLOCK_G=decode_block_g(q_per_kv, seqs), D=head_dim, PAGE_SIZE=16, BLOCK_N=block_n,
                 WRITE_FINAL=False, DOT_DTYPE=tl.bfloat16 if kv_dtype == "bf16" else tl.float16, HEAD_MAJOR=False,
                 SEQS=seqs, LOG2_SEQS=seqs.bit_length() - 1,
                 CHK=CHECK_CHUNK_PAGES, RECORD_GROUPED=seqs > 1, PREFETCH=prefetch, FUSED_MERGE=fused_merge,
                 MERGE_G=merge_g, MERGE_S=merge_s, KV_PAIRS=kv_dtype == "fp8-pairs",
                 SWAP_AB=swap_ab, L2_HINTS=l2_hints, HALVES=halves, LANES=lanes,
                 UINDEX=uindex, STAGGER=stagger)
    signature.update({k: "constexpr" for k in const})
    # pointers and the cache strides are 16-aligned, as Triton specialises them at a real launch
    aligned = [i for i, n in enumerate(names) if n.endswith("_ptr") or n in ("stride_kp", "stride_kt", "stride_kh")]
    attrs = {(i,): [["tt.divisibility", 16]] for i in aligned}
    return triton.compile(ASTSource(paged_decode_kernel, signature, constexprs=const, attrs=attrs),
                          target=GPUTarget("cuda", arch, 32),
                          options=dict(num_warps=warps, num_stages=stages, maxnreg=maxnreg))


# the cache's pointer type per KV dtype the probe runs; "fp8-pairs": fp8 read as int16 pairs (TuneParams.fp8_pairs)
KV_POINTER_TYPES = {"bf16": "*bf16", "fp8": "*fp8e4nv", "fp8-pairs": "*i16"}

# An H100's or H200's SM (sm_90): registers, their allocation unit per warp, and shared memory per block at most
# (cascade_plan/cost/ops/tiles.py SHARED_MEMORY_BYTES["9.0"] holds the same figure; kernels_probe imports only the
# leaf modules of cascade_plan, which that one is not)
SM90_REGISTERS = 65536
SM90_REGISTER_UNIT = 256
SM90_SHARED_BYTES = 227 * 1024


def resource_usage(cubin: bytes) -> dict:
    """{'registers': per thread, 'stack_bytes': per thread (registers spilled to local memory, among others)} of a
    compiled kernel, from Triton's bundled cuobjdump (no driver needed); {} where that tool is missing or says
    nothing."""
    import os
    import subprocess
    import tempfile

    import triton

    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    if not os.path.exists(tool):
        return {}
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "kernel.cubin")
        with open(path, "wb") as f:
            f.write(cubin)
        out = subprocess.run([tool, "--dump-resource-usage", path], capture_output=True, text=True, timeout=60)
    regs, stack = re.search(r"REG:(\d+)", out.stdout), re.search(r"STACK:(\d+)", out.stdout)
    usage = {"registers": int(regs.group(1))} if regs else {}
    if stack:
        usage["stack_bytes"] = int(stack.group(1))
    return usage


def sass_loops(cubin: bytes) -> list[dict]:
    """The loops of a compiled kernel's SASS (Triton's bundled nvdisasm; no driver needed), each a backward branch
    to a label: {'instructions', 'ops' (opcode -> count, predicates and modifiers dropped)}, innermost (shortest)
    first; [] where the tool is missing."""
    import os
    import subprocess
    import tempfile

    import triton

    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "nvdisasm")
    if not os.path.exists(tool):
        return []
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "kernel.cubin")
        with open(path, "wb") as f:
            f.write(cubin)
        sass = subprocess.run([tool, "-c", path], capture_output=True, text=True, timeout=60).stdout
    labels: dict = {}
    ops: list = []
    for line in sass.splitlines():
        label = re.match(r"\s*(\.L_x_\d+):", line)
        if label:
            labels[label.group(1)] = len(ops)
            continue
        ins = re.search(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)(?:\.\S*)?\s*(.*?);", line)
        if ins:
            ops.append((ins.group(1), ins.group(2)))
    loops = []
    for end, (op, operands) in enumerate(ops):
        target = re.search(r"(\.L_x_\d+)", operands) if op == "BRA" else None
        if target and labels.get(target.group(1), end + 1) <= end:
            body = [o for o, _ in ops[labels[target.group(1)]:end + 1]]
            loops.append({"instructions": len(body), "ops": {o: body.count(o) for o in sorted(set(body))}})
    return sorted(loops, key=lambda lp: lp["instructions"])


def resident_programs(registers: int | None, warps: int, shared_bytes: int) -> dict:
    """Programs of one launch an sm_90 SM holds at once, as its registers (warp allocations rounded up to
    SM90_REGISTER_UNIT) and its shared memory each allow: {'by_registers' (None: not known), 'by_shared'}."""
    by_regs = None
    if registers:
        per_warp = -(-registers * 32 // SM90_REGISTER_UNIT) * SM90_REGISTER_UNIT
        by_regs = SM90_REGISTERS // (per_warp * warps)
    return {"by_registers": by_regs, "by_shared": SM90_SHARED_BYTES // shared_bytes if shared_bytes else None}


def decode_pipeline(block_n: int, stages: int, warps: int, *, prefetch: bool, seqs: int = 1, head_dim: int = 128,
                    q_per_kv: int = 4, arch: int = 90, kv_dtype: str = "bf16", swap_ab: bool = False,
                    halves: bool = False, maxnreg: int | None = None, lanes: int = 1, uindex: bool = False,
                    stagger: bool = False) -> dict:
    """Compile paged_decode_kernel for one launch shape (compile_decode) and return {'shared_bytes', 'kv_buffers'
    (the smallest buffer count among its K/V tiles, kv_tile_buffers; 0 where the pipeliner made none), 'waits' (the
    async waits' outstanding-group counts), 'registers' and 'stack_bytes' (per thread, from the cubin; None where not
    known: resource_usage), 'resident' (resident_programs), 'operand_loads' (the PTX's ldmatrix and scalar ld.shared
    instructions: how the dots' operands leave shared memory, as written, not as executed), 'mma' (its warpgroup
    wgmma and warp mma.sync instructions, as written), 'loop_instructions' (loop_instructions of its PTX)}."""
    kernel = compile_decode(block_n, stages, warps, prefetch=prefetch, seqs=seqs, head_dim=head_dim,
                            q_per_kv=q_per_kv, arch=arch, kv_dtype=kv_dtype, swap_ab=swap_ab, halves=halves,
                            maxnreg=maxnreg, lanes=lanes, uindex=uindex, stagger=stagger)
    ir = kernel.asm["ttgir"]
    # a K or V tile's elements: its head dims halved where read as int16 pairs, and again where its dots run over
    # halves of them; lanes lay the same elements out as [lanes, keys / lanes, dims]
    elements = block_n * head_dim // (2 if kv_dtype == "fp8-pairs" else 1) // (2 if halves else 1)
    tiles = kv_tile_buffers(ir, elements)
    usage = resource_usage(kernel.asm["cubin"])
    regs = usage.get("registers")
    shared = int(kernel.metadata.shared)
    ptx = kernel.asm["ptx"]
    return {"shared_bytes": shared, "kv_buffers": min(int(n) for n in tiles) if tiles else 0,
            "waits": [int(n) for n in re.findall(r"async_wait[^\n]*?num = (\d+)", ir)], "registers": regs,
            "stack_bytes": usage.get("stack_bytes"),
            "resident": resident_programs(regs, warps, shared),
            "operand_loads": {"ldmatrix": len(re.findall(r"\bldmatrix\.", ptx)),
                              "ld.shared": len(re.findall(r"\bld\.shared\.", ptx))},
            "mma": {"wgmma": len(re.findall(r"\bwgmma\.mma_async\.", ptx)),
                    "mma.sync": len(re.findall(r"\bmma\.sync\.", ptx))},
            "loop_instructions": loop_instructions(ptx)}


def kv_tile_buffers(ttgir: str, elements: int) -> list[int]:
    """The buffer counts of the shared-memory allocations the pipeliner made for K/V tiles of `elements` elements:
    each such allocation is [buffers, *tile] (the tile 2-D, or 3-D in lanes)."""
    out = []
    for buffers, dims in re.findall(r"local_alloc : \(\) -> !ttg\.memdesc<(\d+)x((?:\d+x)+)(?:bf16|f8E4M3FN|i16)\b",
                                    ttgir):
        size = 1
        for d in dims.rstrip("x").split("x"):
            size *= int(d)
        if size == elements:
            out.append(int(buffers))
    return out


def loop_instructions(ptx: str) -> int:
    """PTX instructions, as written, in the longest loop of a kernel (a label up to the last branch back to it): the
    decode's main token loop, whose instructions each tile pays."""
    lines = ptx.splitlines()
    labels = {m.group(1): i for i, line in enumerate(lines) if (m := re.match(r"^(\$L__BB\d+_\d+):", line))}
    spans = [(labels[m.group(1)], i) for i, line in enumerate(lines)
             if (m := re.search(r"\bbra(?:\.uni)?\s+(\$L__BB\d+_\d+);", line)) and labels.get(m.group(1), i) < i]
    if not spans:
        return 0
    first, last = max(spans, key=lambda s: s[1] - s[0])
    return sum(1 for line in lines[first:last + 1]
               if line.strip() and not line.strip().startswith(("$", ".", "//", "{", "}")))


def main() -> int:
    import dataclasses

    from cascade_plan.own_kernel_launch import TILE_KINDS, tile_of
    from cascade_plan.own_kernel_tune import DEFAULT_TUNE

    names = {"base": "base", "filled": "batch-filled", "long": "long-context", "short": "short (suffix pass)"}
    # the cache as the kernel reads it, and its dots: the default's, then transposed (decode_swap_ab) on the tiles
    # the swap-ab stage times (four warps, a 2-stage base tile)
    layouts = [(kv, False, DEFAULT_TUNE) for kv in KV_POINTER_TYPES]
    swapped = dataclasses.replace(DEFAULT_TUNE, decode_swap_ab=True, decode_warps=4, decode_stages=2)
    layouts += [(kv, True, swapped) for kv in ("bf16", "fp8")]
    print(f"{'launch':22s} {'KV':>9s} {'dots':>10s} {'head dim':>8s} {'tile':>5s} {'stages':>6s} {'warps':>5s} "
          f"{'prefetch':>8s} {'smem KB':>8s} {'K/V buffers':>11s} {'regs':>5s} {'stack':>5s} {'per SM: regs':>12s} "
          f"{'smem':>5s} {'ldmatrix':>8s} {'ld.shared':>9s} {'wgmma':>5s}")
    for kv_dtype, swap, tune in layouts:
        for kind in TILE_KINDS:
            for head_dim in (128, 256):
                bn, st, warps = tile_of(kind, tune, head_dim)
                for pf in (False, True):
                    r = decode_pipeline(bn, st, warps, prefetch=pf, head_dim=head_dim, q_per_kv=2, kv_dtype=kv_dtype,
                                        swap_ab=swap)
                    res, ld = r["resident"], r["operand_loads"]
                    print(f"{names[kind]:22s} {kv_dtype:>9s} {'transposed' if swap else 'default':>10s} "
                          f"{head_dim:8d} {bn:5d} {st:6d} {warps:5d} {str(pf):>8s} "
                          f"{r['shared_bytes'] / 1024:8.1f} {r['kv_buffers']:11d} {r['registers']!s:>5s} "
                          f"{r['stack_bytes']!s:>5s} "
                          f"{res['by_registers']!s:>12s} {res['by_shared']!s:>5s} {ld['ldmatrix']:8d} "
                          f"{ld['ld.shared']:9d} {r['mma']['wgmma']:5d}", flush=True)
    # page blocks of 12 query heads per KV head: one sequence per 16-row dot, two in the 32-row wide dot
    # (wide_dot_seqs), four in a 64-row one, on the long-context tile and on a 64-token tile of two stages
    print(f"\n{'12 query heads per KV head, bf16':34s} {'tile':>5s} {'stages':>6s} {'warps':>5s} {'smem KB':>8s} "
          f"{'K/V buffers':>11s} {'regs':>5s} {'stack':>5s} {'per SM: regs':>12s} {'smem':>5s}")
    bn, st, warps = tile_of("long", DEFAULT_TUNE)
    for seqs, tile in ((1, (bn, st, warps)), (2, (bn, st, warps)), (4, (bn, st, warps)), (4, (bn, st, 8)),
                       (4, (64, 2, 4))):
        r = decode_pipeline(*tile, prefetch=True, seqs=seqs, q_per_kv=12)
        res = r["resident"]
        print(f"{f'blocks of {seqs} ({decode_block_g(12, seqs)}-row dot)':34s} {tile[0]:5d} {tile[1]:6d} "
              f"{tile[2]:5d} {r['shared_bytes'] / 1024:8.1f} {r['kv_buffers']:11d} {r['registers']!s:>5s} "
              f"{r['stack_bytes']!s:>5s} {res['by_registers']!s:>12s} {res['by_shared']!s:>5s}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
