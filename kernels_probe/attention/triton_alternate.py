"""The per-sequence decode's full tiles as alternating half-steps (triton_attend's attend_range, another schedule of
the same online softmax): the loop runs twice per tile, loading the tile's K on even steps and its V on odd ones
through one load, and the dots run transposed (S^T = K q^T, acc^T += V^T P^T).

Why: Triton's pipeliner (3.6-3.9, sm_90) gives every load of a loop the same stage. With a tile's K and V as two
loads, one buffer each, it issues both copies after the tile's math and waits for both at the loop's head (head dim
256's loop spends about half of its stall samples there on an H100); two buffers each take 141 KB at head dim 256.
As one load per half-step, two buffers hold one K or V half-tile each, and the copy of the next half-tile is issued
before this one's math: the tile's V loads while S, the softmax and the rescale run, the next tile's K while P V runs.
FlashInfer's decode orders its copies the same way. Transposed dots on four warps run as warpgroup MMAs that read
their K or V operand straight from shared memory; untransposed ones (mma.sync) would read the half-tile into
registers in both operand layouts on every step, whichever dot the step runs (compiled for sm_90 by Triton 3.6 and
3.9: 255 registers at head dim 256). Hence a cache whose elements are the dots' type (bf16, fp16): an fp8 tile is
widened in registers on its way to the dot."""

from __future__ import annotations

import triton
import triton.language as tl

from kernels_probe.attention.triton_lanes import load_rows, softmax_step, tile_offsets


@triton.jit
def attend_alternating(q, m_i, l_i, acc, start, end, bt_row, k_ptr, v_ptr, stride_kp, stride_kt, h_off,
                       sm_scale_log2, offs_n, offs_d, rmask, BLOCK_N: tl.constexpr, PAGE_SIZE: tl.constexpr,
                       DOT_DTYPE: tl.constexpr, ROW_MASKED: tl.constexpr, POLICY: tl.constexpr,
                       UINDEX: tl.constexpr, STAGES: tl.constexpr):
    """Tokens [start, end) in BLOCK_N-token tiles, the last one masked inside the same loop: q [rows, D] and acc
    [rows, D] in, as attend_range takes them. Step i loads tile i // 2's K (i even) or V (i odd) through the block
    table; an even step computes S^T, the new running max and sum, rescales the accumulator and keeps P^T for the odd
    step, which adds V^T P^T. ROW_MASKED: only the rows where rmask holds attend (attend_tile's meaning).
    Compiled for sm_90, a partial tile run after the loop as attend_range runs it (mma.sync, its K and V through
    registers) took head dim 256's 64-token launch from 139 registers to 198 and from 74.5 KB to 82.5 (Triton 3.6):
    two programs per SM where the masked loop fits three.
    STAGES: the loop's pipeline stages, given to it: Triton (3.6-3.9) pipelines a loop without a stage count of its
    own only where a dot sits in its body, not in a branch."""
    n_tiles = (tl.maximum(end - start, 0) + BLOCK_N - 1) // BLOCK_N
    qt = tl.trans(q)
    acct = tl.trans(acc)
    pt = tl.zeros([BLOCK_N, q.shape[0]], DOT_DTYPE)
    for i in tl.range(0, 2 * n_tiles, num_stages=STAGES):
        t = start + (i >> 1) * BLOCK_N + offs_n
        mask_n = t < end
        kv_off = tile_offsets(offs_n, t, mask_n, bt_row, stride_kp, stride_kt, h_off, PAGE_SIZE, True, False,
                              UINDEX)
        odd = i & 1
        if odd == 1:
            base = v_ptr
        else:
            base = k_ptr
        x = load_rows(base, kv_off, offs_d, mask_n, True, POLICY).to(DOT_DTYPE)
        if odd == 0:
            st = tl.where(mask_n[:, None], tl.dot(x, qt), float("-inf"))
            if ROW_MASKED:
                st = tl.where(rmask[None, :], st, float("-inf"))
            m_new, alpha, p, l_i = softmax_step(st, m_i, l_i, sm_scale_log2, 0, ROW_MASKED)
            acct = acct * alpha[None, :]
            m_i = m_new
            pt = p.to(DOT_DTYPE)
        else:
            acct = tl.dot(tl.trans(x), pt, acct)
    return m_i, l_i, tl.trans(acct)
