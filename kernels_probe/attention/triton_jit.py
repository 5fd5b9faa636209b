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

from kernels_probe.attention.triton_attend import attend_hinted, attend_range
from kernels_probe.attention.triton_merge import merge_seq_rows


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


@triton.jit(do_not_specialize=["stride_bt", "rows_total", "slot_offset", "tokens_per_split", "keep_tokens"])
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
    keep_tokens,
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
    L2_HINTS: tl.constexpr,
    HALVES: tl.constexpr,
    LANES: tl.constexpr,
    UINDEX: tl.constexpr,
    STAGGER: tl.constexpr,
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
        m_i, l_i, acc = attend_hinted(q, m_i, l_i, acc, start, first_end, keep_tokens, bt_first, k_ptr, v_ptr,
                                       stride_kp, stride_kt, h * stride_kh, sm_scale_log2, offs_n, offs_d, mask_g,
                                       BLOCK_N, PAGE_SIZE, DOT_DTYPE, False, PREFETCH, KV_PAIRS, SWAP_AB, L2_HINTS,
                                       HALVES, LANES, UINDEX, STAGGER)
        if SEQS > 1:
            if grouped != 0:  # each sequence's own tokens after the common run, its rows only
                # A loop, not static_range: unrolled 16 times the kernel took ~1 min to compile (16x the PTX)
                for j in range(0, s_blk):
                    end_j = tl.minimum(stop, tl.load(seq_lens_ptr + b0 + j))
                    m_i, l_i, acc = attend_hinted(q, m_i, l_i, acc, first_end, end_j, keep_tokens,
                                                   bt_ptr + (b0 + j).to(tl.int64) * stride_bt, k_ptr, v_ptr,
                                                   stride_kp, stride_kt, h * stride_kh, sm_scale_log2, offs_n,
                                                   offs_d, row_seq == j, BLOCK_N, PAGE_SIZE, DOT_DTYPE, True,
                                                   PREFETCH, KV_PAIRS, SWAP_AB, L2_HINTS, HALVES,
                                                   LANES, UINDEX, STAGGER)
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
    m_i, l_i, acc = attend_range(q, m_i, l_i, acc, start, end, bt_row, k_ptr, v_ptr, stride_kp, stride_kt,
                                  h * stride_kh, sm_scale_log2, offs_n, offs_d, mask_m, BLOCK_N, PAGE_SIZE, DOT_DTYPE,
                                  False, PREFETCH, KV_PAIRS, False, "", False, False)

    # always a state slot (the cascade merges it): no bf16 output, so the state buffer stands in for out_ptr
    _store_rows(acc, m_i, l_i, rows, mask_m, o_state_ptr, lse_state_ptr, o_state_ptr, rows_total, slot_offset + split,
                offs_d, D, False)
