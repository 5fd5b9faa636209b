"""The per-sequence decode's token range in lanes (triton_attend's attend_range, another layout of the same online
softmax): each of the program's warps attends its own slice of every K/V tile with its own running max, sum and
accumulator, and the lanes' states merge once, at the range's end.

Why: with the G query rows (padded to 16) as a dot's M, Triton spreads a 2-D tile's keys over the warps for S = q K^T
and its head dims for acc += P V, so every tile reduces the row max and sum across warps and moves P between them
through shared memory. Compiled for sm_90 (Triton 3.9), the loop of the 128-token four-warp tile at head dim 128 holds
10 barriers, 48 ldmatrix and 16 shuffles; as a batched dot of [LANES, rows, keys / LANES], whose batch Triton gives
one warp each, 2 barriers, 32 ldmatrix and 8 shuffles, for more registers (each warp holds a whole accumulator:
250 per thread where the default takes 166). Timed on an H100 it did not pay (TuneParams.decode_lanes).
FlashInfer's decode splits its tiles' keys between warps the same way. tile_offsets, the K/V rows' offsets through
the block table, and softmax_step, a tile's online-softmax update, serve every layout; load_rows, a 2-D tile's rows
at those offsets, serves attend_range's tiles and triton_stagger's."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def token_page(t, PAGE_SIZE: tl.constexpr, UINDEX: tl.constexpr):
    """(page, position in the page) of tokens t >= 0. UINDEX: in unsigned arithmetic, where a power-of-two page
    size makes each a shift or a mask; signed, each also corrects for a negative t that never comes. Compiled for
    sm_90, the head-dim-256 64-token tile's loop takes 496 PTX instructions where it took 688 (16 rows a thread)."""
    if UINDEX:
        tu = t.to(tl.uint32)
        return (tu // PAGE_SIZE).to(tl.int32), (tu % PAGE_SIZE).to(tl.int32)
    return t // PAGE_SIZE, t % PAGE_SIZE


@triton.jit
def page_numbers(bt_row, t, below, PAGE_SIZE: tl.constexpr, UINDEX: tl.constexpr):
    """The block-table entries of tokens t (any shape) from row bt_row; page 0 for tokens at or past `below`, whose
    entries are not read (the tile loops' next tile, loaded an iteration ahead)."""
    return tl.load(bt_row + token_page(t, PAGE_SIZE, UINDEX)[0], mask=t < below, other=0)


@triton.jit
def tile_offsets(page_in, t, mask_n, bt_row, stride_kp, stride_kt, h_off, PAGE_SIZE: tl.constexpr,
                 MASKED: tl.constexpr, PAGE_GIVEN: tl.constexpr, UINDEX: tl.constexpr):
    """The cache offsets of tokens t (any shape) of one KV head: through the block table row, or (PAGE_GIVEN) from
    page numbers `page_in` loaded an iteration earlier; MASKED loads page numbers only where mask_n holds."""
    pidx, pos = token_page(t, PAGE_SIZE, UINDEX)
    if PAGE_GIVEN:
        page = page_in
    elif MASKED:
        page = tl.load(bt_row + pidx, mask=mask_n, other=0)
    else:
        page = tl.load(bt_row + pidx)
    return page.to(tl.int64) * stride_kp + pos * stride_kt + h_off


@triton.jit
def load_rows(ptr, kv_off, offs_d, mask_n, MASKED: tl.constexpr, POLICY: tl.constexpr):
    """The cache rows at kv_off, head dims offs_d from ptr; only the rows where mask_n holds where MASKED."""
    if MASKED:
        return tl.load(ptr + kv_off[:, None] + offs_d[None, :], mask=mask_n[:, None], other=0.0,
                       eviction_policy=POLICY)
    return tl.load(ptr + kv_off[:, None] + offs_d[None, :], eviction_policy=POLICY)


@triton.jit
def softmax_step(s, m_i, l_i, sm_scale_log2, KEY_AXIS: tl.constexpr, SAFE: tl.constexpr):
    """One tile's online-softmax update from its scores s (keys along KEY_AXIS; m_i and l_i without that axis):
    (the new running max, the old state's rescale factor, P, the new running sum). SAFE: a row that has seen no key
    yet (all its scores -inf) keeps m = -inf without NaNs."""
    m_new = tl.maximum(m_i, tl.max(s, KEY_AXIS) * sm_scale_log2)
    if SAFE:
        m_ref = tl.where(m_new == float("-inf"), 0.0, m_new)
    else:
        m_ref = m_new
    alpha = tl.exp2(m_i - m_ref)
    p = tl.exp2(s * sm_scale_log2 - tl.expand_dims(m_ref, KEY_AXIS))
    return m_new, alpha, p, l_i * alpha + tl.sum(p, KEY_AXIS)


@triton.jit
def lane_tile(q3, m3, l3, acc3, page_in, t0, end, bt_row, k_ptr, v_ptr, stride_kp, stride_kt, h_off, sm_scale_log2,
              tt, offs_d, rmask, PAGE_SIZE: tl.constexpr, DOT_DTYPE: tl.constexpr, MASKED: tl.constexpr,
              ROW_MASKED: tl.constexpr, PAGE_GIVEN: tl.constexpr, POLICY: tl.constexpr, UINDEX: tl.constexpr):
    """One tile, lane l attending tokens t0 + tt[l, :] (tt: [LANES, SUB]) with state m3[l], l3[l], acc3[l].
    MASKED: the range's last, partial tile (a lane may see no key in it); ROW_MASKED: only rows where rmask holds
    attend (attend_tile's meanings). A lane whose rows have seen no key keep m = -inf without NaNs."""
    t = t0 + tt
    mask_n = t < end
    kv_off = tile_offsets(page_in, t, mask_n, bt_row, stride_kp, stride_kt, h_off, PAGE_SIZE, MASKED, PAGE_GIVEN,
                          UINDEX)
    ptrs = kv_off[:, :, None] + offs_d[None, None, :]
    if MASKED:
        k = tl.load(k_ptr + ptrs, mask=mask_n[:, :, None], other=0.0, eviction_policy=POLICY)
    else:
        k = tl.load(k_ptr + ptrs, eviction_policy=POLICY)
    s = tl.dot(q3, tl.permute(k.to(DOT_DTYPE), (0, 2, 1)))
    if MASKED:
        s = tl.where(mask_n[:, None, :], s, float("-inf"))
    if ROW_MASKED:
        s = tl.where(rmask[None, :, None], s, float("-inf"))
    m_new, alpha, p, l3 = softmax_step(s, m3, l3, sm_scale_log2, 2, MASKED or ROW_MASKED)
    if MASKED:
        v = tl.load(v_ptr + ptrs, mask=mask_n[:, :, None], other=0.0, eviction_policy=POLICY)
    else:
        v = tl.load(v_ptr + ptrs, eviction_policy=POLICY)
    acc3 = tl.dot(p.to(DOT_DTYPE), v.to(DOT_DTYPE), acc3 * alpha[:, :, None])
    return m_new, l3, acc3


@triton.jit
def attend_lanes(q, m_i, l_i, acc, start, end, bt_row, k_ptr, v_ptr, stride_kp, stride_kt, h_off, sm_scale_log2,
                 offs_d, rmask, BLOCK_N: tl.constexpr, PAGE_SIZE: tl.constexpr, DOT_DTYPE: tl.constexpr,
                 ROW_MASKED: tl.constexpr, PREFETCH: tl.constexpr, LANES: tl.constexpr, POLICY: tl.constexpr,
                 UINDEX: tl.constexpr):
    """attend_range's tokens [start, end) in LANES lanes: lane l takes the l-th BLOCK_N / LANES tokens of each tile
    (whole pages where that is a multiple of the page size). The incoming state enters lane 0; the lanes merge by
    their maxima at the end. PREFETCH: page numbers loaded an iteration ahead, as attend_range does."""
    SUB: tl.constexpr = BLOCK_N // LANES
    offs_l = tl.arange(0, LANES)
    tt = offs_l[:, None] * SUB + tl.arange(0, SUB)[None, :]
    lane0 = offs_l[:, None] == 0
    m3 = tl.where(lane0, m_i[None, :], float("-inf"))
    l3 = tl.where(lane0, l_i[None, :], 0.0)
    acc3 = tl.where(lane0[:, :, None], acc[None, :, :], 0.0)
    q3 = tl.broadcast_to(q[None, :, :], (LANES, q.shape[0], q.shape[1]))
    n_full = tl.maximum(end - start, 0) // BLOCK_N
    full_end = start + n_full * BLOCK_N
    if PREFETCH:
        page = page_numbers(bt_row, start + tt, full_end, PAGE_SIZE, UINDEX)
        for i in range(0, n_full):
            page_next = page_numbers(bt_row, start + (i + 1) * BLOCK_N + tt, full_end, PAGE_SIZE, UINDEX)
            m3, l3, acc3 = lane_tile(q3, m3, l3, acc3, page, start + i * BLOCK_N, end, bt_row, k_ptr, v_ptr,
                                     stride_kp, stride_kt, h_off, sm_scale_log2, tt, offs_d, rmask, PAGE_SIZE,
                                     DOT_DTYPE, False, ROW_MASKED, True, POLICY, UINDEX)
            page = page_next
    else:
        for i in range(0, n_full):
            m3, l3, acc3 = lane_tile(q3, m3, l3, acc3, tt, start + i * BLOCK_N, end, bt_row, k_ptr, v_ptr,
                                     stride_kp, stride_kt, h_off, sm_scale_log2, tt, offs_d, rmask, PAGE_SIZE,
                                     DOT_DTYPE, False, ROW_MASKED, False, POLICY, UINDEX)
    if full_end < end:
        m3, l3, acc3 = lane_tile(q3, m3, l3, acc3, tt, full_end, end, bt_row, k_ptr, v_ptr, stride_kp, stride_kt,
                                 h_off, sm_scale_log2, tt, offs_d, rmask, PAGE_SIZE, DOT_DTYPE, True, ROW_MASKED,
                                 False, POLICY, UINDEX)
    m_i = tl.max(m3, 0)
    w = tl.exp2(m3 - tl.where(m_i == float("-inf"), 0.0, m_i)[None, :])
    l_i = tl.sum(l3 * w, 0)
    acc = tl.sum(acc3 * w[:, :, None], 0)
    return m_i, l_i, acc
