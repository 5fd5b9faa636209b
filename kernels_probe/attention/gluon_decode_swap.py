"""The Gluon decode with its dots transposed, for at most 8 query heads per KV head: S^T = K q^T and
acc^T += V^T P^T, so that a tile's keys are the dots' M (16 a warp) and the query heads their N, padded to 8 (one
MMA's N) where ``gluon_decode`` pads them to 16 (one MMA's M). Half the MMAs for the same bytes, and each warp's
accumulator is [head dims, 8]: at head dim 256, 64 registers a thread where the untransposed one holds 128.

The loop's order and buffers are gluon_decode's (K and V waited for apart, NBUF buffers each, each warp its own
lane of every tile's keys); its arguments are gluon_decode_kernel's."""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy as cp
from triton.experimental.gluon.language.nvidia.ampere import mma_v2

from kernels_probe.attention.gluon_common import (
    copy_first_tiles,
    copy_tile,
    cta_barrier,
    lane_keys,
    merge_if_last,
    merge_lanes,
    program_range,
    softmax_update,
    tile_offsets,
)

SWAP_MAX_G = 8    # query heads per KV head the transposed dots hold: one MMA's N


@gluon.jit(do_not_specialize=["stride_bt", "rows_total", "slot_offset", "tokens_per_split"])
def gluon_decode_swap_kernel(
    q_ptr, k_ptr, v_ptr, bt_ptr, seq_lens_ptr, o_state_ptr, lse_state_ptr, out_ptr, counter_ptr,
    sm_scale_log2, stride_bt, stride_kp, stride_kt, stride_kh, rows_total, slot_offset, tokens_per_split,
    HKV: gl.constexpr, G: gl.constexpr, D: gl.constexpr, PAGE_SIZE: gl.constexpr, BLOCK_N: gl.constexpr,
    WRITE_FINAL: gl.constexpr, WARPS: gl.constexpr, COPY_TN: gl.constexpr, COPY_TD: gl.constexpr,
    DOT_DTYPE: gl.constexpr, NBUF: gl.constexpr, Q_SMEM: gl.constexpr, K_WIDTH: gl.constexpr, COPY_VEC: gl.constexpr,
    V_WIDEN: gl.constexpr, FUSED_MERGE: gl.constexpr,
):
    BG: gl.constexpr = 8
    NW: gl.constexpr = BLOCK_N // WARPS
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=[WARPS, 1, 1],
                                                  instr_shape=[1, 16, 8])
    op_a: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=mma, k_width=K_WIDTH)
    op_b: gl.constexpr = gl.DotOperandLayout(operand_index=1, parent=mma, k_width=K_WIDTH)
    cpl: gl.constexpr = gl.BlockedLayout([1, 1, COPY_VEC], [1, COPY_TN, COPY_TD], [WARPS, 1, 1], [2, 1, 0])
    tok_l: gl.constexpr = gl.SliceLayout(2, cpl)
    smem_l: gl.constexpr = gl.SwizzledSharedLayout(COPY_VEC, 1, 8, [2, 1, 0])
    col_l: gl.constexpr = gl.SliceLayout(1, mma)       # [lanes, query heads]
    key_l: gl.constexpr = gl.SliceLayout(2, mma)       # [lanes, keys]
    # q^T [lanes, head dims, query heads]: one thread a head dim (a one-time load)
    qt_l: gl.constexpr = gl.BlockedLayout([1, 1, BG], [1, 32, 1], [WARPS, 1, 1], [2, 1, 0])

    HQ: gl.constexpr = HKV * G
    b, h, split, start, end, bt_row, h_off = program_range(seq_lens_ptr, bt_ptr, stride_bt, stride_kh,
                                                           tokens_per_split, HKV)

    qw = gl.arange(0, WARPS, layout=gl.SliceLayout(1, gl.SliceLayout(2, qt_l)))
    qd = gl.arange(0, D, layout=gl.SliceLayout(0, gl.SliceLayout(2, qt_l)))
    qg = gl.arange(0, BG, layout=gl.SliceLayout(0, gl.SliceLayout(1, qt_l)))
    q_off = ((b * HQ + h * G + qg).to(gl.int64)[None, None, :] * D + qd[None, :, None]
             + (qw * 0).to(gl.int64)[:, None, None])
    q_mask = (qg < G)[None, None, :] & (qd < D)[None, :, None] & (qw >= 0)[:, None, None]
    qt = gl.convert_layout(gl.load(q_ptr + q_off, mask=q_mask, other=0.0).to(DOT_DTYPE), op_b)

    offs_d = gl.arange(0, D, layout=gl.SliceLayout(0, gl.SliceLayout(1, cpl)))
    tok_tile = lane_keys(tok_l, WARPS, NW)
    k_buf = gl.allocate_shared_memory(k_ptr.dtype.element_ty, [NBUF, WARPS, NW, D], smem_l)
    v_buf = gl.allocate_shared_memory(v_ptr.dtype.element_ty, [NBUF, WARPS, NW, D], smem_l)
    off_next = copy_first_tiles(k_buf, v_buf, k_ptr, v_ptr, bt_row, start, end, tok_tile, offs_d, stride_kp,
                                stride_kt, h_off, PAGE_SIZE, BLOCK_N, NBUF, D)

    key_tile = lane_keys(key_l, WARPS, NW)
    m_i = gl.full([WARPS, BG], float("-inf"), gl.float32, col_l)
    l_i = gl.zeros([WARPS, BG], gl.float32, col_l)
    acc = gl.zeros([WARPS, D, BG], gl.float32, mma)
    s_zero = gl.zeros([WARPS, NW, BG], gl.float32, mma)
    n_tiles = gl.cdiv(gl.maximum(end - start, 0), BLOCK_N)
    for i in range(n_tiles):
        t0 = start + i * BLOCK_N
        slot = i % NBUF
        t_next = t0 + NBUF * BLOCK_N + tok_tile
        cp.wait_group(2 * NBUF - 1)     # this tile's K has landed; its V may still be on the way
        cta_barrier()
        k = k_buf.index(slot).load(op_a).to(DOT_DTYPE)
        st = mma_v2(k, qt, s_zero)                                           # S^T: [lanes, keys, query heads]
        cta_barrier()
        copy_tile(k_buf.index(slot), k_ptr, off_next, t_next, end, offs_d, D)

        st = gl.where((t0 + key_tile < end)[:, :, None], st * sm_scale_log2, float("-inf"))
        p, m_i, l_i, acc = softmax_update(st, m_i, l_i, acc, 1)
        p_b = gl.convert_layout(p.to(DOT_DTYPE), op_b)                       # P^T: [lanes, keys, query heads]

        cp.wait_group(2 * NBUF - 1)     # this tile's V has landed; the K just issued may still be on the way
        cta_barrier()
        if V_WIDEN:
            vt = gl.convert_layout(gl.permute(v_buf.index(slot).load(cpl).to(DOT_DTYPE), (0, 2, 1)), op_a)
        else:
            vt = v_buf.index(slot).permute((0, 2, 1)).load(op_a).to(DOT_DTYPE)
        acc = mma_v2(vt, p_b, acc)                                           # acc^T: [lanes, head dims, query heads]
        cta_barrier()
        copy_tile(v_buf.index(slot), v_ptr, off_next, t_next, end, offs_d, D)
        off_next = tile_offsets(bt_row, t_next + BLOCK_N, end, stride_kp, stride_kt, h_off, PAGE_SIZE)
    cp.wait_group(0)

    m_all, l_all, o = merge_lanes(m_i, l_i, acc, 1)                                  # o: [head dims, query heads]
    has = l_all > 0.0
    l_safe = gl.where(has, l_all, 1.0)
    o_l: gl.constexpr = gl.SliceLayout(0, mma)
    o = o / gl.convert_layout(l_safe, gl.SliceLayout(0, o_l))[None, :]
    offs_do = gl.arange(0, D, layout=gl.SliceLayout(1, o_l))
    offs_go = gl.arange(0, BG, layout=gl.SliceLayout(0, o_l))
    rows = b * HQ + h * G + offs_go
    o_mask = (offs_go < G)[None, :] & (offs_do < D)[:, None]
    if WRITE_FINAL:
        gl.store(out_ptr + rows.to(gl.int64)[None, :] * D + offs_do[:, None], o.to(out_ptr.dtype.element_ty),
                 mask=o_mask)
    else:
        srow = (slot_offset + split).to(gl.int64) * rows_total + rows
        gl.store(o_state_ptr + srow[None, :] * D + offs_do[:, None], o, mask=o_mask)
        lse = gl.where(has, (m_all + gl.log2(l_safe)) * 0.6931471805599453, float("-inf"))
        offs_gl = gl.arange(0, BG, layout=gl.SliceLayout(0, col_l))
        srow_l = (slot_offset + split).to(gl.int64) * rows_total + b * HQ + h * G + offs_gl
        gl.store(lse_state_ptr + srow_l, lse, mask=offs_gl < G)
        if FUSED_MERGE:     # the split that stores last merges the item's rows (no merge kernel after)
            merge_if_last(counter_ptr, b * HKV + h, o_state_ptr, lse_state_ptr, out_ptr, b * HQ + h * G, rows_total,
                          slot_offset, G, D, BG, WARPS)
