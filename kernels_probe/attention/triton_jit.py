"""Triton decode-attention kernels over a paged KV cache: the JIT kernels only (their launch plans are
``triton_plans``, the host-side launch arithmetic ``cascade_plan.own_kernel_launch``).

Layout (the one vLLM's flash backend and FlashInfer's ``NHD`` use):

* ``k_cache``, ``v_cache``: ``[num_pages, page_size, num_kv_heads, head_dim]`` (bf16/fp16, or fp8 e4m3
  read and widened to bf16 in registers);
* ``q``: ``[batch, num_q_heads, head_dim]``; query head ``hq`` uses KV head ``hq // G`` (GQA);
* a block table row per sequence (int32 page numbers) and a length per sequence.

Attention *states* are ``(o, lse)`` pairs in float32: ``o_state[slot, row, :]`` is the output normalised
over the keys one split saw, ``lse_state[slot, row]`` the natural-log log-sum-exp of its scaled scores
(``-inf`` for a split that saw no key). ``row = b * num_q_heads + hq``. Every pass writes states into
slots of one buffer and a single merge kernel (``triton_merge``) combines any number of slots (the
cascade's prefix level(s) and the suffix), which is how one or several cascade levels are merged; a split
per-sequence decode can instead merge its own splits in the program that finishes a sequence's last split.

Kernels:

* ``paged_decode_kernel``: per-sequence decode, one program per (sequence, KV head, split); the G query
  heads of one KV head form the M rows of a ``tl.dot`` (padded to 16), so each KV byte is read once per
  KV head; split-K along the sequence fills the GPU at small batch (its splits merged by the last one to
  finish, ``FUSED_MERGE``). Used for the per-sequence baseline and for the cascade's suffix pass.
* ``prefix_kernel``: the cascade prefix pass: all sequences' queries of one KV head (``n * G`` rows) as
  one matrix against the shared prefix pages, split along the prefix so that it fills the GPU at any batch.
"""

from __future__ import annotations

import triton
import triton.language as tl

from kernels_probe.attention.triton_merge import merge_seq_rows


@triton.jit
def _kv_tile(ptr, kv_off, offs_d, mask_n, MASKED: tl.constexpr, PAIRS: tl.constexpr):
    """The K or V rows at kv_off: the tile as stored, twice; or (PAIRS: an fp8 e4m3 cache read as int16, two head
    dims a value) its even and its odd head dims as fp16 at 1/256 of their value. The shift puts e4m3's exponent and
    mantissa where fp16's are (exact, subnormals included: fp16's exponent bias is 8 above e4m3's), so each half is a
    plain 16-bit tile that leaves shared memory by ldmatrix; an fp8 tile widened by conversion leaves it by scalar
    loads (pipelining.py)."""
    if MASKED:
        x = tl.load(ptr + kv_off[:, None] + offs_d[None, :], mask=mask_n[:, None], other=0.0)
    else:
        x = tl.load(ptr + kv_off[:, None] + offs_d[None, :])
    if PAIRS:
        u = x.to(tl.uint16, bitcast=True)
        first = (((u << 8) & 0x8000) | ((u << 7) & 0x3F80)).to(tl.uint16).to(tl.float16, bitcast=True)
        second = ((u & 0x8000) | ((u >> 1) & 0x3F80)).to(tl.uint16).to(tl.float16, bitcast=True)
    else:
        first = x
        second = x
    return first, second


@triton.jit
def _attend_tile(q, q2, m_i, l_i, acc, acc2, page_in, t0, end, bt_row, k_ptr, v_ptr, stride_kp, stride_kt, h_off,
                 sm_scale_log2, offs_n, offs_d, rmask, PAGE_SIZE: tl.constexpr, DOT_DTYPE: tl.constexpr,
                 MASKED: tl.constexpr, ROW_MASKED: tl.constexpr, PAGE_GIVEN: tl.constexpr, PAIRS: tl.constexpr,
                 SWAP: tl.constexpr):
    """One BLOCK_N-token tile of online softmax: gather K/V rows through the block table, S = q K^T on the
    tensor cores, rescale, acc += P V. MASKED only for the last, partial tile (no masks on full tiles).
    PAGE_GIVEN: `page_in` holds the tile's page numbers (loaded an iteration earlier); else they are loaded here.
    ROW_MASKED: only the rows where rmask holds attend to these keys (one sequence's private tokens in a program
    that holds several sequences' rows); the others keep their state, and a row that has seen no key yet keeps
    m = -inf without NaNs.
    PAIRS (_kv_tile): q and acc hold the even head dims, q2 and acc2 the odd ones; S is the sum of two dots over
    half the head dim each (sm_scale_log2 and acc carry the tiles' factor of 1/256); else q2 and acc2 pass through.
    SWAP: q and acc come transposed ([D, rows]) and the dots run transposed, S^T = K q^T and acc^T += V^T P^T, so
    that the tile's keys and head dims are their M rows (_attend_range)."""
    KEY_AXIS: tl.constexpr = 0 if SWAP else 1     # the axis of S (and P) along the tile's keys
    tl.static_assert(not (PAIRS and SWAP), "int16 pairs run untransposed dots")
    t = t0 + offs_n
    mask_n = t < end
    if PAGE_GIVEN:
        page = page_in
    elif MASKED:
        page = tl.load(bt_row + t // PAGE_SIZE, mask=mask_n, other=0)
    else:
        page = tl.load(bt_row + t // PAGE_SIZE)
    kv_off = page.to(tl.int64) * stride_kp + (t % PAGE_SIZE) * stride_kt + h_off
    k, k2 = _kv_tile(k_ptr, kv_off, offs_d, mask_n, MASKED, PAIRS)
    if PAIRS:
        s = tl.dot(q2, tl.trans(k2), tl.dot(q, tl.trans(k)))
    elif SWAP:
        s = tl.dot(k.to(DOT_DTYPE), q)
    else:
        s = tl.dot(q, tl.trans(k.to(DOT_DTYPE)))
    if MASKED:
        s = tl.where(tl.expand_dims(mask_n, 1 - KEY_AXIS), s, float("-inf"))
    if ROW_MASKED:
        s = tl.where(tl.expand_dims(rmask, KEY_AXIS), s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, KEY_AXIS) * sm_scale_log2)
    if ROW_MASKED:
        m_ref = tl.where(m_new == float("-inf"), 0.0, m_new)
    else:
        m_ref = m_new
    alpha = tl.exp2(m_i - m_ref)
    p = tl.exp2(s * sm_scale_log2 - tl.expand_dims(m_ref, KEY_AXIS))
    l_i = l_i * alpha + tl.sum(p, KEY_AXIS)
    v, v2 = _kv_tile(v_ptr, kv_off, offs_d, mask_n, MASKED, PAIRS)
    acc = acc * tl.expand_dims(alpha, KEY_AXIS)
    if PAIRS:
        p16 = p.to(tl.float16)
        acc = tl.dot(p16, v, acc)
        acc2 = tl.dot(p16, v2, acc2 * alpha[:, None])
    elif SWAP:
        acc = tl.dot(tl.trans(v.to(DOT_DTYPE)), p.to(DOT_DTYPE), acc)
    else:
        acc = tl.dot(p.to(DOT_DTYPE), v.to(DOT_DTYPE), acc)
    return m_new, l_i, acc, acc2


@triton.jit
def _attend_range(q, m_i, l_i, acc, start, end, bt_row, k_ptr, v_ptr, stride_kp, stride_kt, h_off, sm_scale_log2,
                  offs_n, offs_d, rmask, BLOCK_N: tl.constexpr, PAGE_SIZE: tl.constexpr, DOT_DTYPE: tl.constexpr,
                  ROW_MASKED: tl.constexpr, PREFETCH: tl.constexpr, PAIRS: tl.constexpr, SWAP: tl.constexpr):
    """Tokens [start, end): full tiles without masks, then at most one masked tail tile.
    PREFETCH: each full tile's page numbers are loaded an iteration ahead and carried through the loop. Where K/V
    addresses come from a load in the same iteration, Triton's pipeliner (3.6-3.9, sm_90) gives K and V one buffer
    each and waits for them at the top of every iteration: no load overlaps the tile's own math. Carried page numbers
    let it double-buffer K and V (num_stages 3; a 2-stage launch keeps one buffer either way).
    PAIRS: the cache is fp8 read as int16 (strides and h_off in int16 units): q and acc are split into their even
    and odd head dims here and joined again at the end (_kv_tile).
    SWAP: q and acc are transposed here and back at the end, for dots whose M rows are the tile's keys (S^T = K q^T)
    and head dims (acc^T += V^T P^T): 64 or more, where the query rows (BLOCK_G) are 16-32. Compiled for sm_90 with 4
    warps, Triton then runs warpgroup MMAs (wgmma) that read K and V from shared memory, not mma.sync over ldmatrix."""
    if PAIRS:
        q, q2 = tl.split(tl.reshape(q, (q.shape[0], q.shape[1] // 2, 2)))
        q, q2 = q.to(tl.float16), q2.to(tl.float16)
        acc, acc2 = tl.split(tl.reshape(acc * (1.0 / 256.0), (acc.shape[0], acc.shape[1] // 2, 2)))
        scale = sm_scale_log2 * 256.0
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
        t_first = start + offs_n
        page = tl.load(bt_row + t_first // PAGE_SIZE, mask=t_first < full_end, other=0)
        for i in range(0, n_full):
            t_next = start + (i + 1) * BLOCK_N + offs_n
            page_next = tl.load(bt_row + t_next // PAGE_SIZE, mask=t_next < full_end, other=0)
            m_i, l_i, acc, acc2 = _attend_tile(q, q2, m_i, l_i, acc, acc2, page, start + i * BLOCK_N, end, bt_row,
                                               k_ptr, v_ptr, stride_kp, stride_kt, h_off, scale, offs_n, offs_kv,
                                               rmask, PAGE_SIZE, DOT_DTYPE, False, ROW_MASKED, True, PAIRS, SWAP)
            page = page_next
    else:
        for i in range(0, n_full):
            m_i, l_i, acc, acc2 = _attend_tile(q, q2, m_i, l_i, acc, acc2, offs_n, start + i * BLOCK_N, end, bt_row,
                                               k_ptr, v_ptr, stride_kp, stride_kt, h_off, scale, offs_n, offs_kv,
                                               rmask, PAGE_SIZE, DOT_DTYPE, False, ROW_MASKED, False, PAIRS, SWAP)
    if full_end < end:
        m_i, l_i, acc, acc2 = _attend_tile(q, q2, m_i, l_i, acc, acc2, offs_n, full_end, end, bt_row, k_ptr, v_ptr,
                                           stride_kp, stride_kt, h_off, scale, offs_n, offs_kv, rmask, PAGE_SIZE,
                                           DOT_DTYPE, True, ROW_MASKED, False, PAIRS, SWAP)
    if PAIRS:
        acc = tl.reshape(tl.join(acc, acc2), (acc.shape[0], acc.shape[1] * 2)) * 256.0
    elif SWAP:
        acc = tl.trans(acc)
    return m_i, l_i, acc


@triton.jit
def _common_tokens(bt_ptr, stride_bt, b0, start, end, SEQS: tl.constexpr, PAGE_SIZE: tl.constexpr,
                   CHK: tl.constexpr):
    """The end of the run of tokens from `start` (a page boundary) up to `end` whose pages are the same physical
    pages in the block-table rows of sequences b0 .. b0 + SEQS - 1: the tokens one load can serve to all of them.
    Reads CHK page numbers per sequence at a time and stops at the first chunk with a difference."""
    offs_s = tl.arange(0, SEQS)
    offs_c = tl.arange(0, CHK)
    rows = bt_ptr + (b0 + offs_s).to(tl.int64)[:, None] * stride_bt
    p_first = start // PAGE_SIZE
    n_pages = (tl.maximum(end - start, 0) + PAGE_SIZE - 1) // PAGE_SIZE
    first_diff = n_pages
    c0 = n_pages * 0
    while (c0 < n_pages) & (first_diff == n_pages):
        idx = c0 + offs_c
        pg = tl.load(rows + p_first + idx[None, :], mask=(idx < n_pages)[None, :], other=0)
        p0 = tl.sum(tl.where(offs_s[:, None] == 0, pg, 0), 0)
        diff = tl.max((pg != p0[None, :]).to(tl.int32), 0)
        first_diff = tl.minimum(first_diff, tl.min(tl.where(diff > 0, idx, n_pages), 0))
        c0 += CHK
    return tl.minimum(start + first_diff * PAGE_SIZE, end)


@triton.jit
def _store_rows(acc, m_i, l_i, rows, mask, o_state_ptr, lse_state_ptr, out_ptr, rows_total, slot, offs_d,
                D: tl.constexpr, WRITE_FINAL: tl.constexpr):
    """Normalise one program's rows and store them: the bf16 output (unsplit) or an (o, lse) state slot."""
    has = l_i > 0.0
    l_safe = tl.where(has, l_i, 1.0)
    o = acc / l_safe[:, None]
    if WRITE_FINAL:
        tl.store(out_ptr + rows[:, None].to(tl.int64) * D + offs_d[None, :], o.to(out_ptr.dtype.element_ty),
                 mask=mask[:, None])
    else:
        lse = tl.where(has, (m_i + tl.log2(l_safe)) * 0.6931471805599453, float("-inf"))
        srow = slot.to(tl.int64) * rows_total + rows
        tl.store(o_state_ptr + srow[:, None] * D + offs_d[None, :], o, mask=mask[:, None])
        tl.store(lse_state_ptr + srow, lse, mask=mask)


@triton.jit(do_not_specialize=["stride_bt", "rows_total", "slot_offset", "tokens_per_split"])
def paged_decode_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    bt_ptr,
    seq_lens_ptr,
    o_state_ptr,
    lse_state_ptr,
    out_ptr,
    grouped_ptr,
    counter_ptr,
    sm_scale_log2,
    stride_bt,
    stride_kp,
    stride_kt,
    stride_kh,
    rows_total,
    slot_offset,
    tokens_per_split,
    HKV: tl.constexpr,
    G: tl.constexpr,
    BLOCK_G: tl.constexpr,
    D: tl.constexpr,
    PAGE_SIZE: tl.constexpr,
    BLOCK_N: tl.constexpr,
    WRITE_FINAL: tl.constexpr,
    DOT_DTYPE: tl.constexpr,
    HEAD_MAJOR: tl.constexpr,
    SEQS: tl.constexpr,
    LOG2_SEQS: tl.constexpr,
    CHK: tl.constexpr,
    RECORD_GROUPED: tl.constexpr,
    PREFETCH: tl.constexpr,
    FUSED_MERGE: tl.constexpr,
    MERGE_G: tl.constexpr,
    MERGE_S: tl.constexpr,
    KV_PAIRS: tl.constexpr,
    SWAP_AB: tl.constexpr,
):
    pid_bh = tl.program_id(0)
    split = tl.program_id(1)
    HQ: tl.constexpr = HKV * G
    n_seqs = rows_total // HQ
    if HEAD_MAJOR:  # consecutive programs: same KV head, consecutive sequences
        h = pid_bh // n_seqs
        b = pid_bh % n_seqs
    else:
        b = pid_bh // HKV
        h = pid_bh % HKV
    start = split * tokens_per_split
    # the last split runs to the sequence's end: with splits = ceil(max_seq_len / tokens_per_split) that is where
    # start + tokens_per_split stops it anyway, and a launch with fewer splits (a split at a shared prefix's end, then
    # one for the rest: own_kernel_pages.shared_head_split) gives its last split the tokens the others leave
    stop = tl.where(split == tl.num_programs(1) - 1, 2147483647, start + tokens_per_split)
    end = tl.minimum(stop, tl.load(seq_lens_ptr + b))
    offs_g = tl.arange(0, BLOCK_G)
    offs_d = tl.arange(0, D)
    offs_n = tl.arange(0, BLOCK_N)
    if SEQS > 1:
        # Page-aware: an aligned block of consecutive sequences (SEQS of them, or SEQS / 2, ... down to 2: the
        # largest whose pages agree; s_blk * G <= BLOCK_G rows). Where their pages in this split are the same
        # physical pages for at least one tile and for at least as many tokens as their private tails hold
        # together, the block's first program reads those pages once for all its sequences' rows, then each
        # sequence's own tokens, and the block's other programs do nothing; otherwise every program attends its own
        # sequence, as with SEQS == 1.
        s_blk = b * 0 + 1
        b0 = b
        run = b * 0
        grouped = b * 0   # 0/1
        # Every block shares its first page with the pair it holds, so one pair's first pages decide whether any
        # block is worth looking for: sequences with private pages pay two loads, not the block-table scans.
        b_pair = (b - b % 2).to(tl.int64)
        pg_a = tl.load(bt_ptr + b_pair * stride_bt + start // PAGE_SIZE)
        pg_b = tl.load(bt_ptr + (b_pair + 1) * stride_bt + start // PAGE_SIZE)
        if pg_a == pg_b:
            for lvl in tl.static_range(LOG2_SEQS):
                b0_l = b - b % (SEQS >> lvl)
                ends_l = tl.minimum(stop, tl.load(seq_lens_ptr + b0_l + tl.arange(0, SEQS >> lvl)))
                t_common = _common_tokens(bt_ptr, stride_bt, b0_l, start, tl.min(ends_l, 0), SEQS >> lvl,
                                          PAGE_SIZE, CHK)
                run_l = ((t_common - start) // BLOCK_N) * BLOCK_N
                ok = (grouped == 0) & (run_l > 0) & (run_l >= tl.sum(ends_l, 0) - (SEQS >> lvl) * (start + run_l))
                s_blk = tl.where(ok, SEQS >> lvl, s_blk)
                b0 = tl.where(ok, b0_l, b0)
                run = tl.where(ok, run_l, run)
                grouped = grouped | ok.to(tl.int32)
        k_in = b - b0
        row_seq = tl.where(grouped != 0, offs_g // G, k_in)
        row_g = tl.where(grouped != 0, offs_g % G, offs_g)
        mask_g = tl.where(grouped != 0, offs_g < s_blk * G, offs_g < G)
        rows = (b0 + row_seq) * HQ + h * G + row_g
        first_end = tl.where(grouped != 0, start + run, end)
        bt_first = bt_ptr + b0.to(tl.int64) * stride_bt
        active = (k_in == 0) | (grouped == 0)
        if RECORD_GROUPED:  # per (sequence, KV head, split): the block that read its shared pages once, or 0
            tl.store(grouped_ptr + (b * HKV + h) * tl.num_programs(1) + split,
                     (grouped * s_blk).to(tl.int8))
    else:
        mask_g = offs_g < G
        rows = b * HQ + h * G + offs_g
        first_end = end
        bt_first = bt_ptr + b.to(tl.int64) * stride_bt
        active = True
    if active:
        q = tl.load(q_ptr + rows[:, None].to(tl.int64) * D + offs_d[None, :], mask=mask_g[:, None],
                    other=0.0).to(DOT_DTYPE)
        m_i = tl.full([BLOCK_G], float("-inf"), tl.float32)
        l_i = tl.zeros([BLOCK_G], tl.float32)
        acc = tl.zeros([BLOCK_G, D], tl.float32)
        m_i, l_i, acc = _attend_range(q, m_i, l_i, acc, start, first_end, bt_first, k_ptr, v_ptr, stride_kp,
                                      stride_kt, h * stride_kh, sm_scale_log2, offs_n, offs_d, mask_g, BLOCK_N,
                                      PAGE_SIZE, DOT_DTYPE, False, PREFETCH, KV_PAIRS, SWAP_AB)
        if SEQS > 1:
            if grouped != 0:  # each sequence's own tokens after the common run, its rows only
                # A loop, not static_range: unrolled 16 times the kernel took ~1 min to compile (16x the PTX)
                for j in range(0, s_blk):
                    end_j = tl.minimum(stop, tl.load(seq_lens_ptr + b0 + j))
                    m_i, l_i, acc = _attend_range(q, m_i, l_i, acc, first_end, end_j,
                                                  bt_ptr + (b0 + j).to(tl.int64) * stride_bt, k_ptr, v_ptr,
                                                  stride_kp, stride_kt, h * stride_kh, sm_scale_log2, offs_n, offs_d,
                                                  row_seq == j, BLOCK_N, PAGE_SIZE, DOT_DTYPE, True, PREFETCH,
                                                  KV_PAIRS, SWAP_AB)
        _store_rows(acc, m_i, l_i, rows, mask_g, o_state_ptr, lse_state_ptr, out_ptr, rows_total, slot_offset + split,
                    offs_d, D, WRITE_FINAL)
        if FUSED_MERGE:
            # Each (sequence, KV head) counts the splits that stored its rows; the program whose store is the last
            # merges them, so no merge kernel runs after this launch (the separate merge waited for the launch's
            # slowest program, then paid a launch of its own). Not with page blocks (decode_fused_merge), where a
            # block's first program stores its sequences' rows. The barrier orders every warp's stores before the
            # counting atomic (release); its acquire orders the merge's loads after the other programs' stores.
            tl.static_assert(SEQS == 1, "the fused merge counts one sequence's rows per program")
            tl.debug_barrier()
            item = b * HKV + h
            if tl.atomic_add(counter_ptr + item, 1, sem="acq_rel") == tl.num_programs(1) - 1:
                merge_seq_rows(o_state_ptr, lse_state_ptr, out_ptr, b * HQ + h * G, rows_total, slot_offset,
                               tl.num_programs(1), G, MERGE_G, MERGE_S, D)
                tl.store(counter_ptr + item, 0)  # every split has counted: ready for the next launch


@triton.jit(do_not_specialize=["stride_bt", "rows_total", "slot_offset", "seqs_per_group", "first_seq",
                              "prefix_len", "tokens_per_split"])
def prefix_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    bt_ptr,
    o_state_ptr,
    lse_state_ptr,
    sm_scale_log2,
    stride_bt,
    stride_kp,
    stride_kt,
    stride_kh,
    rows_total,
    slot_offset,
    seqs_per_group,
    first_seq,
    prefix_len,
    tokens_per_split,
    HKV: tl.constexpr,
    G: tl.constexpr,
    D: tl.constexpr,
    PAGE_SIZE: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    DOT_DTYPE: tl.constexpr,
    PREFETCH: tl.constexpr,
    KV_PAIRS: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_gh = tl.program_id(1)
    split = tl.program_id(2)
    grp = pid_gh // HKV
    h = pid_gh % HKV
    HQ: tl.constexpr = HKV * G
    n_rows = seqs_per_group * G
    start = split * tokens_per_split
    end = tl.minimum(start + tokens_per_split, prefix_len)

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, D)
    offs_n = tl.arange(0, BLOCK_N)
    mask_m = offs_m < n_rows
    seq = first_seq + grp * seqs_per_group + offs_m // G
    rows = seq * HQ + h * G + offs_m % G
    q = tl.load(q_ptr + rows[:, None].to(tl.int64) * D + offs_d[None, :], mask=mask_m[:, None], other=0.0).to(DOT_DTYPE)

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    bt_row = bt_ptr + grp.to(tl.int64) * stride_bt
    m_i, l_i, acc = _attend_range(q, m_i, l_i, acc, start, end, bt_row, k_ptr, v_ptr, stride_kp, stride_kt,
                                  h * stride_kh, sm_scale_log2, offs_n, offs_d, mask_m, BLOCK_N, PAGE_SIZE, DOT_DTYPE,
                                  False, PREFETCH, KV_PAIRS, False)

    # always a state slot (the cascade merges it): no bf16 output, so the state buffer stands in for out_ptr
    _store_rows(acc, m_i, l_i, rows, mask_m, o_state_ptr, lse_state_ptr, o_state_ptr, rows_total, slot_offset + split,
                offs_d, D, False)
