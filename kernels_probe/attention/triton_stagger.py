"""The per-sequence decode's token range with the next tile's K and V loaded while this tile's math runs
(triton_attend's attend_range, another schedule of the same online softmax): the loop carries the next tile's K and V
in registers, as plain loads, so each load's latency runs under a whole tile's q K^T, softmax and P V.

Why: Triton's pipeliner (3.6-3.9, sm_90) gives K and V of one tile the same stage: with one shared-memory buffer each
it waits for both copies at the top of every iteration (head dim 256's loop spends about half of its stall samples
there on an H100), and two buffers each take 141 KB at head dim 256. FlashInfer's decode commits K and V as separate
copy groups and waits for one at a time. Loads the loop carries itself need no pipeliner (the launch runs one stage)
and no buffer per stage: each tile passes through shared memory only on its way into the dots' operand layout.
Timed on an H100 it did not pay (TuneParams.decode_stagger)."""

from __future__ import annotations

import triton
import triton.language as tl

from kernels_probe.attention.triton_lanes import load_rows, page_numbers, softmax_step, tile_offsets


@triton.jit
def attend_staggered(q, m_i, l_i, acc, start, end, bt_row, k_ptr, v_ptr, stride_kp, stride_kt, h_off, sm_scale_log2,
                     offs_n, offs_d, rmask, BLOCK_N: tl.constexpr, PAGE_SIZE: tl.constexpr, DOT_DTYPE: tl.constexpr,
                     ROW_MASKED: tl.constexpr, POLICY: tl.constexpr, UINDEX: tl.constexpr):
    """Tokens [start, end) in BLOCK_N-token tiles, the last one masked; plain dots (q: [rows, D]). The first tile's K
    and V are loaded before the loop; iteration i turns tile i's K and V into dot operands, loads tile i + 1's K and V
    (nothing past `end`) and tile i + 2's page numbers, then computes S_i, rescales and adds P_i V_i.
    ROW_MASKED: only the rows where rmask holds attend (attend_tile's meaning)."""
    n_tiles = (tl.maximum(end - start, 0) + BLOCK_N - 1) // BLOCK_N
    t = start + offs_n
    mask_n = t < end
    kv_off = tile_offsets(page_numbers(bt_row, t, end, PAGE_SIZE, UINDEX), t, mask_n, bt_row, stride_kp, stride_kt,
                          h_off, PAGE_SIZE, True, True, UINDEX)
    k = load_rows(k_ptr, kv_off, offs_d, mask_n, True, POLICY)
    v = load_rows(v_ptr, kv_off, offs_d, mask_n, True, POLICY)
    page_next = page_numbers(bt_row, t + BLOCK_N, end, PAGE_SIZE, UINDEX)
    for i in range(0, n_tiles):
        k_op = tl.trans(k.to(DOT_DTYPE))
        v_op = v.to(DOT_DTYPE)
        t_next = start + (i + 1) * BLOCK_N + offs_n
        mask_next = t_next < end
        kv_next = tile_offsets(page_next, t_next, mask_next, bt_row, stride_kp, stride_kt, h_off, PAGE_SIZE, True,
                               True, UINDEX)
        k = load_rows(k_ptr, kv_next, offs_d, mask_next, True, POLICY)
        v = load_rows(v_ptr, kv_next, offs_d, mask_next, True, POLICY)
        page_next = page_numbers(bt_row, t_next + BLOCK_N, end, PAGE_SIZE, UINDEX)
        s = tl.dot(q, k_op)
        s = tl.where(mask_n[None, :], s, float("-inf"))
        if ROW_MASKED:
            s = tl.where(rmask[:, None], s, float("-inf"))
        # a row that has seen no key yet (masked rows) keeps m = -inf without NaNs
        m_new, alpha, p, l_i = softmax_step(s, m_i, l_i, sm_scale_log2, 1, True)
        acc = tl.dot(p.to(DOT_DTYPE), v_op, acc * alpha[:, None])
        m_i = m_new
        mask_n = mask_next
    return m_i, l_i, acc
