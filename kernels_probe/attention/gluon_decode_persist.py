"""The Gluon decode made persistent: a launch of a fixed number of programs P, program p taking work items
(sequence, KV head) p, p + P, p + 2P, ... as one stream of tiles, so that the copies run on across an item's end.

Why: launched one program per item (``gluon_decode``), each program starts with nothing in flight, waits a whole
copy's latency for its first tile, and ends with nothing in flight while its lanes merge and its rows are stored.
At 4,096 items on 132 SMs, two programs an SM, that happens 15 to 16 times in each program slot. Here the copies
NBUF tiles ahead belong to the next item once this one runs out, so a slot waits for a first tile once. Items
strided by P keep the items in flight at once consecutive, as a grid launch has them, which keeps a group's shared
prefix pages in L2 for the group's sequences.

Two cursors walk the stream: the copy cursor NBUF tiles ahead (``next_tile``), the compute cursor as two loops, the
items and each item's tiles, so that the lanes' merge and the store at an item's end sit outside the tile loop
(Triton 3.6, sm_90, 128-token tiles at head dim 128: one loop spilled 384 bytes a thread, some inside it; two spill
128, all outside the tile loop). q rides with the copies: the K copy of an item's
first tile carries the item's q rows into a buffer of their own (NBUF of them, by the item's count modulo NBUF: the
copy NBUF tiles ahead never overwrites a q that a tile before it still has to read), and the lanes read it into
registers once per item. Unsplit only: every item writes its own rows of ``out``. Each tile's order, lanes and
buffers are ``gluon_decode``'s; the launch is ``gluon_plans.GluonDecode(persist=...)`` or, on the probe's route,
``TuneParams.decode_gluon_persist``.

Gluon does not run under TRITON_INTERPRET: compiled on the CPU for sm_90 (tests/test_gluon_decode_compile.py),
checked against float32 on a GPU only (benchmarks/decode_gluon_check.py)."""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy as cp
from triton.experimental.gluon.language.nvidia.ampere import mma_v2

from cascade_plan.own_kernel_launch import persistent_programs
from kernels_probe.attention.gluon_common import (
    async_copy_to_shared,
    copy_tile,
    cta_barrier,
    lane_keys,
    merge_lanes,
    softmax_update,
    store_item_rows,
    tile_offsets,
)
from kernels_probe.attention.gluon_decode import check_swap_heads


@gluon.jit
def item_range(it, n_items, seq_lens_ptr, bt_ptr, stride_bt, stride_kh, HKV: gl.constexpr, BLOCK_N: gl.constexpr):
    """Work item `it`'s (end, tiles, block-table row, head offset): an item past the last has no tokens and one
    tile, whose copies read nothing and fill zeros."""
    valid = it < n_items
    itc = gl.where(valid, it, 0)
    b = itc // HKV
    end = gl.load(seq_lens_ptr + b, mask=valid, other=0)
    return end, gl.maximum(gl.cdiv(end, BLOCK_N), 1), bt_ptr + b.to(gl.int64) * stride_bt, (itc % HKV) * stride_kh


@gluon.jit
def next_tile(it, i, n, end, bt_row, h_off, j, n_items, seq_lens_ptr, bt_ptr, stride_bt, stride_kh,
              HKV: gl.constexpr, BLOCK_N: gl.constexpr):
    """A cursor over a program's tile stream moved one tile on: (item, tile of it, its tiles, end, block-table row,
    head offset, count of the program's items before it)."""
    i += 1
    if i == n:
        it += gl.num_programs(0)
        i = 0
        j += 1
        end, n, bt_row, h_off = item_range(it, n_items, seq_lens_ptr, bt_ptr, stride_bt, stride_kh, HKV, BLOCK_N)
    return it, i, n, end, bt_row, h_off, j


@gluon.jit
def copy_q(q_buf, q_ptr, it, n_items, offs_qw, offs_qg, offs_qd, HQ: gl.constexpr, G: gl.constexpr,
           D: gl.constexpr, HKV: gl.constexpr):
    """Start copying item `it`'s q rows into each of q_buf's copies ([copies, rows, head dims]; rows past G, and an
    item past the last, zero-filled), in the commit group the next copy_tile closes."""
    itc = gl.where(it < n_items, it, 0)
    rows = (itc // HKV) * HQ + (itc % HKV) * G + offs_qg
    msk = (((offs_qg < G) & (it < n_items))[None, :, None] & (offs_qd < D)[None, None, :]
           & (offs_qw >= 0)[:, None, None])
    off = rows.to(gl.int64)[None, :, None] * D + offs_qd[None, None, :] + (offs_qw * 0).to(gl.int64)[:, None, None]
    async_copy_to_shared(q_buf, q_ptr + off, mask=msk)


@gluon.jit(do_not_specialize=["stride_bt", "n_items"])
def gluon_decode_persist_kernel(
    q_ptr, k_ptr, v_ptr, bt_ptr, seq_lens_ptr, out_ptr,
    sm_scale_log2, stride_bt, stride_kp, stride_kt, stride_kh, n_items,
    HKV: gl.constexpr, G: gl.constexpr, D: gl.constexpr, PAGE_SIZE: gl.constexpr, BLOCK_N: gl.constexpr,
    WARPS: gl.constexpr, COPY_TN: gl.constexpr, COPY_TD: gl.constexpr, DOT_DTYPE: gl.constexpr, NBUF: gl.constexpr,
    K_WIDTH: gl.constexpr, COPY_VEC: gl.constexpr, Q_VEC: gl.constexpr, Q_TN: gl.constexpr, Q_TD: gl.constexpr,
    SWAP: gl.constexpr, Q_LANES: gl.constexpr,
):
    # SWAP: gluon_decode's transposed dots (S^T = K q^T, acc^T += V^T P^T, query heads padded to 8, one MMA's
    # N); otherwise gluon_decode's (query heads padded to 16, one MMA's M). A1 x A2: the accumulator, S1 x S2: S
    BG: gl.constexpr = 8 if SWAP else 16
    NW: gl.constexpr = BLOCK_N // WARPS
    KEY_AXIS: gl.constexpr = 1 if SWAP else 2
    A1: gl.constexpr = D if SWAP else BG
    A2: gl.constexpr = BG if SWAP else D
    S1: gl.constexpr = NW if SWAP else BG
    S2: gl.constexpr = BG if SWAP else NW
    # gluon_decode's layouts: the batched MMA (each warp its own batch), its operands, the copies and their buffers
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=[WARPS, 1, 1],
                                                  instr_shape=[1, 16, 8])
    op_a: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=mma, k_width=K_WIDTH)
    op_b: gl.constexpr = gl.DotOperandLayout(operand_index=1, parent=mma, k_width=K_WIDTH)
    cpl: gl.constexpr = gl.BlockedLayout([1, 1, COPY_VEC], [1, COPY_TN, COPY_TD], [WARPS, 1, 1], [2, 1, 0])
    tok_l: gl.constexpr = gl.SliceLayout(2, cpl)
    smem_l: gl.constexpr = gl.SwizzledSharedLayout(COPY_VEC, 1, 8, [2, 1, 0])
    # q's copies: Q_LANES, one a lane (warp), which each lane reads at every tile as a dot operand; otherwise one,
    # which every lane reads once an item into registers ([D, BG] transposed). Copied 16 bytes a thread, the warps
    # along the copies or, with one copy, along its rows
    QC: gl.constexpr = WARPS if Q_LANES else 1
    qcl: gl.constexpr = gl.BlockedLayout([1, 1, Q_VEC], [1, Q_TN, Q_TD], [QC, WARPS // QC, 1], [2, 1, 0])
    q3l: gl.constexpr = gl.BlockedLayout([1, 1, Q_VEC], [1, Q_TN, Q_TD], [WARPS, 1, 1], [2, 1, 0])
    qt3l: gl.constexpr = gl.BlockedLayout([1, 1, BG], [1, 32, 1], [WARPS, 1, 1], [2, 1, 0])
    q_smem_l: gl.constexpr = gl.SwizzledSharedLayout(Q_VEC, 1, 8, [2, 1, 0])
    row_l: gl.constexpr = gl.SliceLayout(KEY_AXIS, mma)         # [lanes, query heads]
    key_l: gl.constexpr = gl.SliceLayout(3 - KEY_AXIS, mma)     # [lanes, keys]

    HQ: gl.constexpr = HKV * G
    offs_d = gl.arange(0, D, layout=gl.SliceLayout(0, gl.SliceLayout(1, cpl)))
    offs_qw = gl.arange(0, QC, layout=gl.SliceLayout(1, gl.SliceLayout(2, qcl)))
    offs_qg = gl.arange(0, BG, layout=gl.SliceLayout(0, gl.SliceLayout(2, qcl)))
    offs_qd = gl.arange(0, D, layout=gl.SliceLayout(0, gl.SliceLayout(1, qcl)))
    tok_tile = lane_keys(tok_l, WARPS, NW)
    key_tile = lane_keys(key_l, WARPS, NW)
    k_buf = gl.allocate_shared_memory(k_ptr.dtype.element_ty, [NBUF, WARPS, NW, D], smem_l)
    v_buf = gl.allocate_shared_memory(v_ptr.dtype.element_ty, [NBUF, WARPS, NW, D], smem_l)
    q_buf = gl.allocate_shared_memory(q_ptr.dtype.element_ty, [NBUF, QC, BG, D], q_smem_l)

    # the copy cursor (c_*) runs NBUF tiles ahead of the compute cursor
    it = gl.program_id(0)
    j = it * 0          # the program's items before this one
    end, n, c_bt, c_h = item_range(it, n_items, seq_lens_ptr, bt_ptr, stride_bt, stride_kh, HKV, BLOCK_N)
    c_it, c_i, c_n, c_end, c_j = it, j, n, end, j
    for s0 in gl.static_range(NBUF):
        t_c = c_i * BLOCK_N + tok_tile
        off = tile_offsets(c_bt, t_c, c_end, stride_kp, stride_kt, c_h, PAGE_SIZE)
        if c_i == 0:
            copy_q(q_buf.index(c_j % NBUF), q_ptr, c_it, n_items, offs_qw, offs_qg, offs_qd, HQ, G, D, HKV)
        copy_tile(k_buf.index(s0), k_ptr, off, t_c, c_end, offs_d, D)
        copy_tile(v_buf.index(s0), v_ptr, off, t_c, c_end, offs_d, D)
        c_it, c_i, c_n, c_end, c_bt, c_h, c_j = next_tile(c_it, c_i, c_n, c_end, c_bt, c_h, c_j, n_items,
                                                          seq_lens_ptr, bt_ptr, stride_bt, stride_kh, HKV, BLOCK_N)
    off_next = tile_offsets(c_bt, c_i * BLOCK_N + tok_tile, c_end, stride_kp, stride_kt, c_h, PAGE_SIZE)

    m_i = gl.full([WARPS, BG], float("-inf"), gl.float32, row_l)
    l_i = gl.zeros([WARPS, BG], gl.float32, row_l)
    acc = gl.zeros([WARPS, A1, A2], gl.float32, mma)
    s_zero = gl.zeros([WARPS, S1, S2], gl.float32, mma)
    step = it * 0
    while it < n_items:
        cp.wait_group(2 * NBUF - 1)     # the item's q (with its first tile's K) has landed
        cta_barrier()
        if not Q_LANES:
            if SWAP:     # [1, D, BG]: every lane reads the one copy
                q1 = q_buf.index(j % NBUF).permute((0, 2, 1)).load(qt3l)
                q3 = gl.convert_layout((q1 + gl.zeros([WARPS, D, BG], q1.dtype, qt3l)).to(DOT_DTYPE), op_b)
            else:
                q1 = q_buf.index(j % NBUF).load(q3l)
                q3 = gl.convert_layout((q1 + gl.zeros([WARPS, BG, D], q1.dtype, q3l)).to(DOT_DTYPE), op_a)
        for i in range(n):
            slot = step % NBUF
            cp.wait_group(2 * NBUF - 1)     # this tile's K has landed
            cta_barrier()
            if Q_LANES:     # read at every tile: ldmatrix gives the dot its operand's registers as it wants them
                if SWAP:
                    q3 = q_buf.index(j % NBUF).permute((0, 2, 1)).load(op_b).to(DOT_DTYPE)
                else:
                    q3 = q_buf.index(j % NBUF).load(op_a).to(DOT_DTYPE)
            if SWAP:
                s = mma_v2(k_buf.index(slot).load(op_a).to(DOT_DTYPE), q3, s_zero)                  # S^T
            else:
                s = mma_v2(q3, k_buf.index(slot).permute((0, 2, 1)).load(op_b).to(DOT_DTYPE), s_zero)
            cta_barrier()         # every lane has read K (and q): the buffers take the tile NBUF ahead
            t_c = c_i * BLOCK_N + tok_tile
            if c_i == 0:
                copy_q(q_buf.index(c_j % NBUF), q_ptr, c_it, n_items, offs_qw, offs_qg, offs_qd, HQ, G, D, HKV)
            copy_tile(k_buf.index(slot), k_ptr, off_next, t_c, c_end, offs_d, D)

            s = gl.where(gl.expand_dims(i * BLOCK_N + key_tile < end, 3 - KEY_AXIS), s * sm_scale_log2,
                         float("-inf"))
            p, m_i, l_i, acc = softmax_update(s, m_i, l_i, acc, KEY_AXIS)
            p_op = gl.convert_layout(p.to(DOT_DTYPE), op_b if SWAP else op_a)

            cp.wait_group(2 * NBUF - 1)     # this tile's V has landed
            cta_barrier()
            if SWAP:
                acc = mma_v2(v_buf.index(slot).permute((0, 2, 1)).load(op_a).to(DOT_DTYPE), p_op, acc)   # acc^T
            else:
                acc = mma_v2(p_op, v_buf.index(slot).load(op_b).to(DOT_DTYPE), acc)
            cta_barrier()
            copy_tile(v_buf.index(slot), v_ptr, off_next, t_c, c_end, offs_d, D)
            c_it, c_i, c_n, c_end, c_bt, c_h, c_j = next_tile(c_it, c_i, c_n, c_end, c_bt, c_h, c_j, n_items,
                                                              seq_lens_ptr, bt_ptr, stride_bt, stride_kh, HKV,
                                                              BLOCK_N)
            off_next = tile_offsets(c_bt, c_i * BLOCK_N + tok_tile, c_end, stride_kp, stride_kt, c_h, PAGE_SIZE)
            step += 1
        # the item's lanes merge, its rows are stored, the state starts again
        m_all, l_all, o = merge_lanes(m_i, l_i, acc, KEY_AXIS)
        store_item_rows(o, m_all, l_all, (it // HKV) * HQ + (it % HKV) * G, out_ptr, out_ptr, out_ptr, 0, it * 0,
                        mma, row_l, KEY_AXIS - 1, G, D, BG, True)     # final rows: no state pointers read
        m_i = gl.full([WARPS, BG], float("-inf"), gl.float32, row_l)
        l_i = gl.zeros([WARPS, BG], gl.float32, row_l)
        acc = gl.zeros([WARPS, A1, A2], gl.float32, mma)
        it += gl.num_programs(0)
        j += 1
        end, n, _, _ = item_range(it, n_items, seq_lens_ptr, bt_ptr, stride_bt, stride_kh, HKV, BLOCK_N)
    cp.wait_group(0)


PERSIST_ARGS = ["q_ptr", "k_ptr", "v_ptr", "bt_ptr", "seq_lens_ptr", "out_ptr", "sm_scale_log2", "stride_bt",
                "stride_kp", "stride_kt", "stride_kh", "n_items"]


def gluon_persist_constants(num_kv_heads: int, q_per_kv: int, head_dim: int, page_size: int, block_n: int,
                            warps: int, dot_dtype, *, fp8: bool = False, nbuf: int = 1, swap: bool = False,
                            q_lanes: bool | None = None) -> dict:
    """The persistent kernel's constexprs for one launch shape: gluon_decode's tile, lanes and buffers (its checks
    included), and q's copy, 16 bytes of bf16 a thread."""
    from kernels_probe.attention.gluon_decode import copy_threads, gluon_decode_constants

    base = gluon_decode_constants(num_kv_heads, q_per_kv, head_dim, page_size, block_n, warps, True, dot_dtype,
                                  fp8=fp8, nbuf=nbuf)
    keep = ("HKV", "G", "D", "PAGE_SIZE", "BLOCK_N", "WARPS", "COPY_TN", "COPY_TD", "DOT_DTYPE", "NBUF", "K_WIDTH",
            "COPY_VEC")
    q_vec, q_tn, q_td = copy_threads(head_dim, 2)
    if swap:
        check_swap_heads(q_per_kv)
    return {**{k: base[k] for k in keep}, "Q_VEC": q_vec, "Q_TN": q_tn, "Q_TD": q_td, "SWAP": swap,
            "Q_LANES": persist_q_lanes(head_dim, swap, nbuf) if q_lanes is None else q_lanes}


def persist_q_lanes(head_dim: int, swap: bool, nbuf: int) -> bool:
    """Does the persistent kernel keep a copy of q a lane, read at every tile (Q_LANES)? Untransposed at head dim 128
    and up with one buffer each. Compiled for sm_90 (Triton 3.6, 128-token tiles at head dim 128), the one copy read
    once an item into registers leaves them where the dots cannot take them: 64 register moves in each tile's loop
    (969 instructions, the grid kernel's 868), against 882 read at every tile. At head dim 64 the lanes' copies take
    the registers from 168 (three programs an SM) to 220 (two); with two buffers each, shared memory from 104 KB to
    128 KB (one program an SM); transposed, the loop is 13 and 20 instructions longer with them."""
    return not swap and head_dim >= 128 and nbuf == 1


def compile_gluon_persist(block_n: int = 64, warps: int = 4, *, head_dim: int = 128, q_per_kv: int = 4,
                          kv_dtype: str = "bf16", nbuf: int = 1, swap: bool = False, q_lanes: bool | None = None,
                          arch: int = 90):
    """The persistent kernel compiled for one launch shape without a GPU: CI's check that it builds."""
    import triton.language as tl

    from kernels_probe.attention.gluon_decode import compile_gluon

    fp8 = kv_dtype == "fp8"
    const = gluon_persist_constants(8, q_per_kv, head_dim, 16, block_n, warps, tl.float16 if fp8 else tl.bfloat16,
                                    fp8=fp8, nbuf=nbuf, swap=swap, q_lanes=q_lanes)
    return compile_gluon(gluon_decode_persist_kernel, PERSIST_ARGS, kv_dtype, const, warps=warps, arch=arch)


def capped_programs(args: tuple, const: dict, launch_opts: dict, items: int, sm_count: int, per_sm: int) -> int:
    """The persistent launch's program count (persistent_programs) for `items` items at per_sm programs an SM, but
    no more an SM than it holds: the kernel is compiled (not run) for these arguments, constexprs and launch options
    to read its registers and shared memory."""
    compiled = gluon_decode_persist_kernel.warmup(*args, grid=(1,), **const, **launch_opts)
    return persistent_programs(items, sm_count, resident_per_sm(compiled, launch_opts["num_warps"], per_sm))


def resident_per_sm(compiled, warps: int, per_sm: int) -> int:
    """per_sm, but no more programs an SM than it holds of `compiled` (its registers and shared memory, as an sm_90
    SM allots them): a persistent launch of more would leave programs waiting for a slot, each of them a whole
    program's time late. The registers are the loaded kernel's (n_regs), or, before it is loaded (a warmup's
    compile only), its cubin's."""
    from kernels_probe.attention.pipelining import resident_programs, resource_usage

    regs = getattr(compiled, "n_regs", None) or resource_usage(compiled.asm["cubin"]).get("registers")
    held = resident_programs(regs, warps, int(compiled.metadata.shared))
    return max(1, min([per_sm, *(v for v in held.values() if v)]))
