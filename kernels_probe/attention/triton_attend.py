"""The online-softmax pieces of the probe's Triton decode kernels (triton_jit): one K/V tile through the block
table (kv_tile, attend_tile), a token range of them (attend_range, or in lanes: attend_span), and a range cut where
the shared prefix ends for L2 hints (attend_hinted). Each carries its rows' running max, sum and accumulator."""

from __future__ import annotations

import triton
import triton.language as tl

from kernels_probe.attention.triton_lanes import attend_lanes, load_rows, page_numbers, softmax_step, tile_offsets
from kernels_probe.attention.triton_stagger import attend_staggered


@triton.jit
def kv_tile(ptr, kv_off, offs_d, mask_n, MASKED: tl.constexpr, PAIRS: tl.constexpr, POLICY: tl.constexpr,
            HALVES: tl.constexpr):
    """The K or V rows at kv_off: the tile as stored, twice; or (PAIRS: an fp8 e4m3 cache read as int16, two head
    dims a value) its even and its odd head dims as fp16 at 1/256 of their value. The shift puts e4m3's exponent and
    mantissa where fp16's are (exact, subnormals included: fp16's exponent bias is 8 above e4m3's), so each half is a
    plain 16-bit tile that leaves shared memory by ldmatrix; an fp8 tile widened by conversion leaves it by scalar
    loads (pipelining.py). POLICY: the loads' L2 eviction policy ("": normal; attend_hinted).
    HALVES: the first and the second half of the head dims, two loads of offs_d's width each (offs_d spans half)."""
    x = load_rows(ptr, kv_off, offs_d, mask_n, MASKED, POLICY)
    if HALVES:
        return x, load_rows(ptr + offs_d.shape[0], kv_off, offs_d, mask_n, MASKED, POLICY)
    if PAIRS:
        u = x.to(tl.uint16, bitcast=True)
        first = (((u << 8) & 0x8000) | ((u << 7) & 0x3F80)).to(tl.uint16).to(tl.float16, bitcast=True)
        second = ((u & 0x8000) | ((u >> 1) & 0x3F80)).to(tl.uint16).to(tl.float16, bitcast=True)
    else:
        first = x
        second = x
    return first, second


@triton.jit
def attend_tile(q, q2, m_i, l_i, acc, acc2, page_in, t0, end, bt_row, k_ptr, v_ptr, stride_kp, stride_kt, h_off,
                 sm_scale_log2, offs_n, offs_d, rmask, PAGE_SIZE: tl.constexpr, DOT_DTYPE: tl.constexpr,
                 MASKED: tl.constexpr, ROW_MASKED: tl.constexpr, PAGE_GIVEN: tl.constexpr, PAIRS: tl.constexpr,
                 SWAP: tl.constexpr, POLICY: tl.constexpr, HALVES: tl.constexpr, UINDEX: tl.constexpr):
    """One BLOCK_N-token tile of online softmax: gather K/V rows through the block table, S = q K^T on the
    tensor cores, rescale, acc += P V. MASKED only for the last, partial tile (no masks on full tiles).
    PAGE_GIVEN: `page_in` holds the tile's page numbers (loaded an iteration earlier); else they are loaded here.
    ROW_MASKED: only the rows where rmask holds attend to these keys (one sequence's private tokens in a program
    that holds several sequences' rows); the others keep their state, and a row that has seen no key yet keeps
    m = -inf without NaNs.
    PAIRS (kv_tile): q and acc hold the even head dims, q2 and acc2 the odd ones; S is the sum of two dots over
    half the head dim each (sm_scale_log2 and acc carry the tiles' factor of 1/256); else q2 and acc2 pass through.
    SWAP: q and acc come transposed ([D, rows]) and the dots run transposed, S^T = K q^T and acc^T += V^T P^T, so
    that the tile's keys and head dims are their M rows (attend_range).
    HALVES: as PAIRS, q and acc the first half of the head dims and q2 and acc2 the second, without PAIRS' factor."""
    KEY_AXIS: tl.constexpr = 0 if SWAP else 1     # the axis of S (and P) along the tile's keys
    # PAIRS and HALVES: two dots each, over half the head dims; pairs' operands are fp16 whatever DOT_DTYPE says
    TWO_DOTS: tl.constexpr = PAIRS or HALVES
    HALF_DTYPE: tl.constexpr = tl.float16 if PAIRS else DOT_DTYPE
    tl.static_assert(not (PAIRS and SWAP), "int16 pairs run untransposed dots")
    tl.static_assert(not (HALVES and (PAIRS or SWAP)), "halves of the head dims run plain untransposed dots")
    t = t0 + offs_n
    mask_n = t < end
    kv_off = tile_offsets(page_in, t, mask_n, bt_row, stride_kp, stride_kt, h_off, PAGE_SIZE, MASKED, PAGE_GIVEN,
                          UINDEX)
    k, k2 = kv_tile(k_ptr, kv_off, offs_d, mask_n, MASKED, PAIRS, POLICY, HALVES)
    if TWO_DOTS:
        s = tl.dot(q2, tl.trans(k2.to(HALF_DTYPE)), tl.dot(q, tl.trans(k.to(HALF_DTYPE))))
    elif SWAP:
        s = tl.dot(k.to(DOT_DTYPE), q)
    else:
        s = tl.dot(q, tl.trans(k.to(DOT_DTYPE)))
    if MASKED:
        s = tl.where(tl.expand_dims(mask_n, 1 - KEY_AXIS), s, float("-inf"))
    if ROW_MASKED:
        s = tl.where(tl.expand_dims(rmask, KEY_AXIS), s, float("-inf"))
    m_new, alpha, p, l_i = softmax_step(s, m_i, l_i, sm_scale_log2, KEY_AXIS, ROW_MASKED)
    v, v2 = kv_tile(v_ptr, kv_off, offs_d, mask_n, MASKED, PAIRS, POLICY, HALVES)
    acc = acc * tl.expand_dims(alpha, KEY_AXIS)
    if TWO_DOTS:
        ph = p.to(HALF_DTYPE)
        acc = tl.dot(ph, v.to(HALF_DTYPE), acc)
        acc2 = tl.dot(ph, v2.to(HALF_DTYPE), acc2 * alpha[:, None])
    elif SWAP:
        acc = tl.dot(tl.trans(v.to(DOT_DTYPE)), p.to(DOT_DTYPE), acc)
    else:
        acc = tl.dot(p.to(DOT_DTYPE), v.to(DOT_DTYPE), acc)
    return m_new, l_i, acc, acc2


@triton.jit
def attend_range(q, m_i, l_i, acc, start, end, bt_row, k_ptr, v_ptr, stride_kp, stride_kt, h_off, sm_scale_log2,
                  offs_n, offs_d, rmask, BLOCK_N: tl.constexpr, PAGE_SIZE: tl.constexpr, DOT_DTYPE: tl.constexpr,
                  ROW_MASKED: tl.constexpr, PREFETCH: tl.constexpr, PAIRS: tl.constexpr, SWAP: tl.constexpr,
                  POLICY: tl.constexpr, HALVES: tl.constexpr, UINDEX: tl.constexpr):
    """Tokens [start, end): full tiles without masks, then at most one masked tail tile.
    PREFETCH: each full tile's page numbers are loaded an iteration ahead and carried through the loop. Where K/V
    addresses come from a load in the same iteration, Triton's pipeliner (3.6-3.9, sm_90) gives K and V one buffer
    each and waits for them at the top of every iteration: no load overlaps the tile's own math. Carried page numbers
    let it double-buffer K and V (num_stages 3; a 2-stage launch keeps one buffer either way).
    PAIRS: the cache is fp8 read as int16 (strides and h_off in int16 units): q and acc are split into their even
    and odd head dims here and joined again at the end (kv_tile).
    SWAP: q and acc are transposed here and back at the end, for dots whose M rows are the tile's keys (S^T = K q^T)
    and head dims (acc^T += V^T P^T): 64 or more, where the query rows (BLOCK_G) are 16-32. Compiled for sm_90 with 4
    warps, Triton then runs warpgroup MMAs (wgmma) that read K and V from shared memory, not mma.sync over ldmatrix.
    HALVES: q and acc are split into the first and the second half of their head dims here and joined at the end: each
    dot's K or V operand is half the tile, so fewer of its values are live in registers at once."""
    if PAIRS:
        q, q2 = tl.split(tl.reshape(q, (q.shape[0], q.shape[1] // 2, 2)))
        q, q2 = q.to(tl.float16), q2.to(tl.float16)
        acc, acc2 = tl.split(tl.reshape(acc * (1.0 / 256.0), (acc.shape[0], acc.shape[1] // 2, 2)))
        scale = sm_scale_log2 * 256.0
        offs_kv = tl.arange(0, offs_d.shape[0] // 2)
    elif HALVES:
        q, q2 = tl.split(tl.permute(tl.reshape(q, (q.shape[0], 2, q.shape[1] // 2)), (0, 2, 1)))
        acc, acc2 = tl.split(tl.permute(tl.reshape(acc, (acc.shape[0], 2, acc.shape[1] // 2)), (0, 2, 1)))
        scale = sm_scale_log2
        offs_kv = tl.arange(0, offs_d.shape[0] // 2)
    else:
        if SWAP:
            q = tl.trans(q)
            acc = tl.trans(acc)
        q2, acc2 = q, acc
        scale = sm_scale_log2
        offs_kv = offs_d
    n_full = tl.maximum(end - start, 0) // BLOCK_N
    full_end = start + n_full * BLOCK_N
    if PREFETCH:
        page = page_numbers(bt_row, start + offs_n, full_end, PAGE_SIZE, UINDEX)
        for i in range(0, n_full):
            page_next = page_numbers(bt_row, start + (i + 1) * BLOCK_N + offs_n, full_end, PAGE_SIZE, UINDEX)
            m_i, l_i, acc, acc2 = attend_tile(q, q2, m_i, l_i, acc, acc2, page, start + i * BLOCK_N, end, bt_row,
                                               k_ptr, v_ptr, stride_kp, stride_kt, h_off, scale, offs_n, offs_kv,
                                               rmask, PAGE_SIZE, DOT_DTYPE, False, ROW_MASKED, True, PAIRS, SWAP,
                                               POLICY, HALVES, UINDEX)
            page = page_next
    else:
        for i in range(0, n_full):
            m_i, l_i, acc, acc2 = attend_tile(q, q2, m_i, l_i, acc, acc2, offs_n, start + i * BLOCK_N, end, bt_row,
                                               k_ptr, v_ptr, stride_kp, stride_kt, h_off, scale, offs_n, offs_kv,
                                               rmask, PAGE_SIZE, DOT_DTYPE, False, ROW_MASKED, False, PAIRS, SWAP,
                                               POLICY, HALVES, UINDEX)
    if full_end < end:
        m_i, l_i, acc, acc2 = attend_tile(q, q2, m_i, l_i, acc, acc2, offs_n, full_end, end, bt_row, k_ptr, v_ptr,
                                           stride_kp, stride_kt, h_off, scale, offs_n, offs_kv, rmask, PAGE_SIZE,
                                           DOT_DTYPE, True, ROW_MASKED, False, PAIRS, SWAP, POLICY, HALVES, UINDEX)
    if PAIRS:
        acc = tl.reshape(tl.join(acc, acc2), (acc.shape[0], acc.shape[1] * 2)) * 256.0
    elif HALVES:
        acc = tl.reshape(tl.permute(tl.join(acc, acc2), (0, 2, 1)), (acc.shape[0], acc.shape[1] * 2))
    elif SWAP:
        acc = tl.trans(acc)
    return m_i, l_i, acc


@triton.jit
def attend_span(q, m_i, l_i, acc, start, end, bt_row, k_ptr, v_ptr, stride_kp, stride_kt, h_off, sm_scale_log2,
                offs_n, offs_d, rmask, BLOCK_N: tl.constexpr, PAGE_SIZE: tl.constexpr, DOT_DTYPE: tl.constexpr,
                ROW_MASKED: tl.constexpr, PREFETCH: tl.constexpr, PAIRS: tl.constexpr, SWAP: tl.constexpr,
                POLICY: tl.constexpr, HALVES: tl.constexpr, LANES: tl.constexpr, UINDEX: tl.constexpr,
                STAGGER: tl.constexpr):
    """attend_range, or in LANES > 1 lanes (triton_lanes.attend_lanes), or with the next tile's K and V loaded
    (STAGGER: triton_stagger.attend_staggered); those two run plain dots only."""
    if STAGGER:
        tl.static_assert(not (PAIRS or SWAP or HALVES) and LANES == 1, "staggered loads run plain dots")
        m_i, l_i, acc = attend_staggered(q, m_i, l_i, acc, start, end, bt_row, k_ptr, v_ptr, stride_kp, stride_kt,
                                         h_off, sm_scale_log2, offs_n, offs_d, rmask, BLOCK_N, PAGE_SIZE, DOT_DTYPE,
                                         ROW_MASKED, POLICY, UINDEX)
    elif LANES > 1:
        tl.static_assert(not (PAIRS or SWAP or HALVES), "lanes run plain untransposed dots")
        m_i, l_i, acc = attend_lanes(q, m_i, l_i, acc, start, end, bt_row, k_ptr, v_ptr, stride_kp, stride_kt, h_off,
                                     sm_scale_log2, offs_d, rmask, BLOCK_N, PAGE_SIZE, DOT_DTYPE, ROW_MASKED,
                                     PREFETCH, LANES, POLICY, UINDEX)
    else:
        m_i, l_i, acc = attend_range(q, m_i, l_i, acc, start, end, bt_row, k_ptr, v_ptr, stride_kp, stride_kt,
                                      h_off, sm_scale_log2, offs_n, offs_d, rmask, BLOCK_N, PAGE_SIZE, DOT_DTYPE,
                                      ROW_MASKED, PREFETCH, PAIRS, SWAP, POLICY, HALVES, UINDEX)
    return m_i, l_i, acc


@triton.jit
def attend_hinted(q, m_i, l_i, acc, start, end, keep_tokens, bt_row, k_ptr, v_ptr, stride_kp, stride_kt, h_off,
                   sm_scale_log2, offs_n, offs_d, rmask, BLOCK_N: tl.constexpr, PAGE_SIZE: tl.constexpr,
                   DOT_DTYPE: tl.constexpr, ROW_MASKED: tl.constexpr, PREFETCH: tl.constexpr, PAIRS: tl.constexpr,
                   SWAP: tl.constexpr, L2_HINTS: tl.constexpr, HALVES: tl.constexpr, LANES: tl.constexpr,
                   UINDEX: tl.constexpr, STAGGER: tl.constexpr):
    """attend_span over [start, end), its K/V loads hinted to L2 by L2_HINTS (0: none): the tokens below
    keep_tokens (the shared prefix the launch was told; whole tiles from start) are loaded with evict_last (2) or
    normally (1), those from there on with evict_first. Other sequences read the shared pages again and nobody reads
    a private page twice, so a private stream that enters L2 as the first to leave it keeps the shared pages there."""
    if L2_HINTS == 0:
        m_i, l_i, acc = attend_span(q, m_i, l_i, acc, start, end, bt_row, k_ptr, v_ptr, stride_kp, stride_kt,
                                     h_off, sm_scale_log2, offs_n, offs_d, rmask, BLOCK_N, PAGE_SIZE, DOT_DTYPE,
                                     ROW_MASKED, PREFETCH, PAIRS, SWAP, "", HALVES, LANES, UINDEX, STAGGER)
    else:
        mid = tl.minimum(start + (tl.maximum(keep_tokens - start, 0) // BLOCK_N) * BLOCK_N, tl.maximum(end, start))
        m_i, l_i, acc = attend_span(q, m_i, l_i, acc, start, mid, bt_row, k_ptr, v_ptr, stride_kp, stride_kt,
                                     h_off, sm_scale_log2, offs_n, offs_d, rmask, BLOCK_N, PAGE_SIZE, DOT_DTYPE,
                                     ROW_MASKED, PREFETCH, PAIRS, SWAP, "evict_last" if L2_HINTS == 2 else "",
                                     HALVES, LANES, UINDEX, STAGGER)
        m_i, l_i, acc = attend_span(q, m_i, l_i, acc, mid, end, bt_row, k_ptr, v_ptr, stride_kp, stride_kt,
                                     h_off, sm_scale_log2, offs_n, offs_d, rmask, BLOCK_N, PAGE_SIZE, DOT_DTYPE,
                                     ROW_MASKED, PREFETCH, PAIRS, SWAP, "evict_first", HALVES, LANES, UINDEX,
                                     STAGGER)
    return m_i, l_i, acc
