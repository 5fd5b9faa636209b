"""Triton decode-attention kernels over a paged KV cache.

Layout (the one vLLM's flash backend and FlashInfer's ``NHD`` use):

* ``k_cache``, ``v_cache``: ``[num_pages, page_size, num_kv_heads, head_dim]`` (bf16/fp16, or fp8 e4m3
  read and widened to bf16 in registers);
* ``q``: ``[batch, num_q_heads, head_dim]``; query head ``hq`` uses KV head ``hq // G`` (GQA);
* a block table row per sequence (int32 page numbers) and a length per sequence.

Attention *states* are ``(o, lse)`` pairs in float32: ``o_state[slot, row, :]`` is the output normalised
over the keys one split saw, ``lse_state[slot, row]`` the natural-log log-sum-exp of its scaled scores
(``-inf`` for a split that saw no key). ``row = b * num_q_heads + hq``. Every pass writes states into
slots of one buffer and a single merge kernel combines any number of slots (split-K partials, the
cascade's prefix level(s) and the suffix), which is how one or several cascade levels are merged.

Kernels:

* ``paged_decode_kernel``: per-sequence decode, one program per (sequence, KV head, split); the G query
  heads of one KV head form the M rows of a ``tl.dot`` (padded to 16), so each KV byte is read once per
  KV head; split-K along the sequence fills the GPU at small batch. Used for the per-sequence baseline
  and for the cascade's suffix pass.
* ``prefix_kernel``: the cascade prefix pass: all sequences' queries of one KV head (``n * G`` rows) as
  one matrix against the shared prefix pages, split along the prefix so that it fills the GPU at any batch.
* ``merge_kernel``: merges the states of any number of slots into the final bf16 output (and optionally
  the merged LSE, for chaining).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453


@triton.jit
def _attend_tile(q, m_i, l_i, acc, t0, end, bt_row, k_ptr, v_ptr, stride_kp, stride_kt, h_off, sm_scale_log2,
                 offs_n, offs_d, PAGE_SIZE: tl.constexpr, DOT_DTYPE: tl.constexpr, MASKED: tl.constexpr):
    """One BLOCK_N-token tile of online softmax: gather K/V rows through the block table, S = q K^T on the
    tensor cores, rescale, acc += P V. MASKED only for the last, partial tile (no masks on full tiles)."""
    t = t0 + offs_n
    if MASKED:
        mask_n = t < end
        page = tl.load(bt_row + t // PAGE_SIZE, mask=mask_n, other=0)
    else:
        page = tl.load(bt_row + t // PAGE_SIZE)
    kv_off = page.to(tl.int64) * stride_kp + (t % PAGE_SIZE) * stride_kt + h_off
    if MASKED:
        k = tl.load(k_ptr + kv_off[:, None] + offs_d[None, :], mask=mask_n[:, None], other=0.0)
    else:
        k = tl.load(k_ptr + kv_off[:, None] + offs_d[None, :])
    s = tl.dot(q, tl.trans(k.to(DOT_DTYPE)))
    if MASKED:
        s = tl.where(mask_n[None, :], s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1) * sm_scale_log2)
    alpha = tl.exp2(m_i - m_new)
    p = tl.exp2(s * sm_scale_log2 - m_new[:, None])
    l_i = l_i * alpha + tl.sum(p, 1)
    if MASKED:
        v = tl.load(v_ptr + kv_off[:, None] + offs_d[None, :], mask=mask_n[:, None], other=0.0)
    else:
        v = tl.load(v_ptr + kv_off[:, None] + offs_d[None, :])
    acc = acc * alpha[:, None]
    acc = tl.dot(p.to(DOT_DTYPE), v.to(DOT_DTYPE), acc)
    return m_new, l_i, acc


@triton.jit
def _attend_range(q, m_i, l_i, acc, start, end, bt_row, k_ptr, v_ptr, stride_kp, stride_kt, h_off, sm_scale_log2,
                  offs_n, offs_d, BLOCK_N: tl.constexpr, PAGE_SIZE: tl.constexpr, DOT_DTYPE: tl.constexpr):
    """Tokens [start, end): full tiles without masks, then at most one masked tail tile."""
    n_full = tl.maximum(end - start, 0) // BLOCK_N
    for i in range(0, n_full):
        m_i, l_i, acc = _attend_tile(q, m_i, l_i, acc, start + i * BLOCK_N, end, bt_row, k_ptr, v_ptr, stride_kp,
                                     stride_kt, h_off, sm_scale_log2, offs_n, offs_d, PAGE_SIZE, DOT_DTYPE, False)
    tail = start + n_full * BLOCK_N
    if tail < end:
        m_i, l_i, acc = _attend_tile(q, m_i, l_i, acc, tail, end, bt_row, k_ptr, v_ptr, stride_kp, stride_kt, h_off,
                                     sm_scale_log2, offs_n, offs_d, PAGE_SIZE, DOT_DTYPE, True)
    return m_i, l_i, acc


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
):
    pid_bh = tl.program_id(0)
    split = tl.program_id(1)
    if HEAD_MAJOR:  # consecutive programs: same KV head, consecutive sequences
        n_seqs = rows_total // (HKV * G)
        h = pid_bh // n_seqs
        b = pid_bh % n_seqs
    else:
        b = pid_bh // HKV
        h = pid_bh % HKV
    HQ: tl.constexpr = HKV * G
    seq_len = tl.load(seq_lens_ptr + b)
    start = split * tokens_per_split
    end = tl.minimum(start + tokens_per_split, seq_len)

    offs_g = tl.arange(0, BLOCK_G)
    offs_d = tl.arange(0, D)
    offs_n = tl.arange(0, BLOCK_N)
    mask_g = offs_g < G
    rows = b * HQ + h * G + offs_g
    q = tl.load(q_ptr + rows[:, None].to(tl.int64) * D + offs_d[None, :], mask=mask_g[:, None], other=0.0).to(DOT_DTYPE)

    m_i = tl.full([BLOCK_G], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_G], tl.float32)
    acc = tl.zeros([BLOCK_G, D], tl.float32)
    bt_row = bt_ptr + b.to(tl.int64) * stride_bt
    m_i, l_i, acc = _attend_range(q, m_i, l_i, acc, start, end, bt_row, k_ptr, v_ptr, stride_kp, stride_kt,
                                  h * stride_kh, sm_scale_log2, offs_n, offs_d, BLOCK_N, PAGE_SIZE, DOT_DTYPE)

    has = l_i > 0.0
    l_safe = tl.where(has, l_i, 1.0)
    o = acc / l_safe[:, None]
    if WRITE_FINAL:
        tl.store(out_ptr + rows[:, None].to(tl.int64) * D + offs_d[None, :], o.to(out_ptr.dtype.element_ty),
                 mask=mask_g[:, None])
    else:
        lse = tl.where(has, (m_i + tl.log2(l_safe)) * 0.6931471805599453, float("-inf"))
        slot = slot_offset + split
        srow = slot.to(tl.int64) * rows_total + rows
        tl.store(o_state_ptr + srow[:, None] * D + offs_d[None, :], o, mask=mask_g[:, None])
        tl.store(lse_state_ptr + srow, lse, mask=mask_g)


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
                                  h * stride_kh, sm_scale_log2, offs_n, offs_d, BLOCK_N, PAGE_SIZE, DOT_DTYPE)

    has = l_i > 0.0
    l_safe = tl.where(has, l_i, 1.0)
    o = acc / l_safe[:, None]
    lse = tl.where(has, (m_i + tl.log2(l_safe)) * 0.6931471805599453, float("-inf"))
    slot = slot_offset + split
    srow = slot.to(tl.int64) * rows_total + rows
    tl.store(o_state_ptr + srow[:, None] * D + offs_d[None, :], o, mask=mask_m[:, None])
    tl.store(lse_state_ptr + srow, lse, mask=mask_m)


@triton.jit(do_not_specialize=["num_slots", "rows_total"])
def merge_kernel(
    o_state_ptr,
    lse_state_ptr,
    out_ptr,
    lse_out_ptr,
    num_slots,
    rows_total,
    D: tl.constexpr,
    BLOCK_R: tl.constexpr,
    BLOCK_D: tl.constexpr,
    WRITE_LSE: tl.constexpr,
):
    """One pass over the slots with a running max (each state read once); grid = (row blocks, D / BLOCK_D)."""
    pid = tl.program_id(0)
    rows = pid * BLOCK_R + tl.arange(0, BLOCK_R)
    offs_d = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    mask_r = rows < rows_total
    m = tl.full([BLOCK_R], float("-inf"), tl.float32)
    acc = tl.zeros([BLOCK_R, BLOCK_D], tl.float32)
    den = tl.zeros([BLOCK_R], tl.float32)
    for s in range(num_slots):
        srow = s * rows_total + rows
        lse = tl.load(lse_state_ptr + srow, mask=mask_r, other=float("-inf"))
        o = tl.load(o_state_ptr + srow[:, None].to(tl.int64) * D + offs_d[None, :], mask=mask_r[:, None], other=0.0)
        m_new = tl.maximum(m, lse)
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        scale_old = tl.exp(m - m_safe)
        w = tl.exp(lse - m_safe)
        acc = acc * scale_old[:, None] + w[:, None] * o
        den = den * scale_old + w
        m = m_new
    den_safe = tl.where(den > 0.0, den, 1.0)
    out = acc / den_safe[:, None]
    tl.store(out_ptr + rows[:, None].to(tl.int64) * D + offs_d[None, :], out.to(out_ptr.dtype.element_ty),
             mask=mask_r[:, None])
    if WRITE_LSE:
        if tl.program_id(1) == 0:
            m_fin = tl.where(m == float("-inf"), 0.0, m)
            tl.store(lse_out_ptr + rows, tl.where(den > 0.0, m_fin + tl.log(den_safe), float("-inf")), mask=mask_r)


# --------------------------------------------------------------------------------------------------
# Launch plans: choose split counts and tile sizes on the host, launch without host syncs (graph-safe).
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TuneParams:
    """Tile sizes and launch shape; defaults are the ones picked on the H200 (see docs/probe.md)."""

    decode_block_n: int = 64
    decode_warps: int = 4
    decode_stages: int = 3
    prefix_block_n: int = 64
    prefix_warps: int = 4
    prefix_stages: int = 3
    prefix_max_block_m: int = 128
    min_tokens_per_split: int = 256
    target_programs_per_sm: int = 4  # split-K target for per-sequence decode (and the suffix pass)
    # split target for the prefix pass: 2 programs per SM leaves room for the concurrent suffix pass and
    # halves the merge's state traffic (H200: cascade 110 -> 97.5 us at B=256 P=4096 S=128; 58 -> 41 us
    # at B=16 P=16384), although the prefix pass alone is slower (56 -> 68 us at B=256)
    prefix_programs_per_sm: int = 2
    merge_block_r: int = 16  # upper bound; smaller when there are few rows (see MergePlan)
    merge_block_d: int = 64
    merge_stages: int = 3
    # per-sequence programs with few tokens (the cascade's suffix pass): their own tile / pipeline depth
    decode_short_tokens: int = 256
    decode_short_block_n: int = 64
    decode_short_stages: int = 2
    decode_short_warps: int = 4
    # decode tiles of 128 tokens once the batch alone fills the GPU (no split): +8% over shared pages
    decode_block_n_large_batch: int = 128
    decode_stages_large_batch: int = 2
    decode_warps_large_batch: int = 4
    decode_head_major: bool = False  # program order: (sequence, head) [False] or (head, sequence) [True]
    # cascade: run the suffix pass on a second stream, concurrently with the prefix pass (graph branches)
    cascade_concurrent: bool = True


DEFAULT_TUNE = TuneParams()


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def choose_splits(work_items: int, tokens: int, sm_count: int, block_n: int, *, min_tokens: int,
                  target_per_sm: int) -> tuple[int, int]:
    """Split count and tokens per split (a multiple of block_n) so that work_items * splits fills the GPU."""
    if tokens <= 0:
        return 1, block_n
    want = _ceil_div(target_per_sm * sm_count, max(work_items, 1))
    max_splits = max(1, tokens // max(min_tokens, block_n))
    splits = max(1, min(want, max_splits))
    tps = _ceil_div(_ceil_div(tokens, splits), block_n) * block_n
    splits = _ceil_div(tokens, tps)
    return splits, tps


def choose_splits_waves(work_items: int, tokens: int, sm_count: int, block_n: int, *, min_tokens: int,
                        target_per_sm: int, ctas_per_sm: int = 1) -> tuple[int, int]:
    """Like choose_splits, but among split counts within 2x of the target it takes the one whose program count
    fills its last wave best (wave quantization: on the H200, 320 prefix programs of one per SM ran 20% slower
    than 256 or 512 at B=256, P=4096)."""
    s0, _ = choose_splits(work_items, tokens, sm_count, block_n, min_tokens=min_tokens, target_per_sm=target_per_sm)
    max_splits = max(1, tokens // max(min_tokens, block_n))
    best = None
    for s in range(max(1, s0 // 2), min(max_splits, 2 * s0) + 1):
        x = work_items * s / (sm_count * ctas_per_sm)
        eff = x / math.ceil(x)
        key = (round(eff, 2), -abs(s - s0), -s)
        if best is None or key > best[0]:
            best = (key, s)
    s = best[1] if best else s0
    tps = _ceil_div(_ceil_div(tokens, s), block_n) * block_n
    return _ceil_div(tokens, tps), tps


def prefix_block_m(rows: int, max_block_m: int) -> int:
    bm = 16
    while bm < rows and bm < max_block_m:
        bm *= 2
    return bm


def dot_dtype(q_dtype):
    """Operand type of tl.dot: q's type on a GPU; float32 under Triton's interpreter for bf16, whose
    interpreted tl.dot multiplies bf16 bit patterns as integers (Triton 3.6)."""
    if q_dtype == torch.bfloat16 and os.environ.get("TRITON_INTERPRET") == "1":
        return tl.float32
    return {torch.bfloat16: tl.bfloat16, torch.float16: tl.float16, torch.float32: tl.float32}[q_dtype]


def _scale_log2(head_dim: int, sm_scale: float | None) -> float:
    return (sm_scale if sm_scale is not None else 1.0 / math.sqrt(head_dim)) * LOG2E


class StateBuffer:
    """Float32 (o, lse) slots for `rows` rows; slots are handed out in order."""

    def __init__(self, num_slots: int, rows: int, head_dim: int, device):
        self.o = torch.empty((num_slots, rows, head_dim), dtype=torch.float32, device=device)
        self.lse = torch.empty((num_slots, rows), dtype=torch.float32, device=device)
        self.rows = rows
        self.num_slots = num_slots


class DecodePlan:
    """Per-sequence split-K paged decode: one launch (splits == 1, writes bf16 output) or decode + merge."""

    def __init__(self, q, k_cache, v_cache, block_table, seq_lens, max_seq_len, out, *, sm_count,
                 tune: TuneParams = DEFAULT_TUNE, sm_scale=None, states: StateBuffer | None = None,
                 slot_offset: int = 0, force_splits: int | None = None):
        B, HQ, D = q.shape
        _, PS, HKV, D2 = k_cache.shape
        assert D == D2 and HQ % HKV == 0
        self.q, self.k, self.v, self.bt, self.seq_lens, self.out = q, k_cache, v_cache, block_table, seq_lens, out
        self.B, self.HQ, self.HKV, self.D, self.PS, self.G = B, HQ, HKV, D, PS, HQ // HKV
        self.tune = tune
        self.scale_log2 = _scale_log2(D, sm_scale)
        self.block_n = tune.decode_block_n
        if force_splits is not None:
            tps = _ceil_div(_ceil_div(max(max_seq_len, 1), force_splits), self.block_n) * self.block_n
            self.splits, self.tps = _ceil_div(max(max_seq_len, 1), tps), tps
        else:
            self.splits, self.tps = choose_splits(B * HKV, max_seq_len, sm_count, self.block_n,
                                                  min_tokens=tune.min_tokens_per_split,
                                                  target_per_sm=tune.target_programs_per_sm)
        large_batch = force_splits is None and self.splits == 1 and B * HKV >= tune.target_programs_per_sm * sm_count
        self.stages, self.warps = tune.decode_stages, tune.decode_warps
        if large_batch:  # the batch alone fills the GPU: longer tiles
            self.block_n = tune.decode_block_n_large_batch
            self.stages, self.warps = tune.decode_stages_large_batch, tune.decode_warps_large_batch
        if self.tps <= tune.decode_short_tokens:  # one or two tiles per program: shallow pipeline, more CTAs/SM
            self.block_n, self.stages, self.warps = (tune.decode_short_block_n, tune.decode_short_stages,
                                                     tune.decode_short_warps)
        # external states: the caller merges (cascade suffix pass); else we own a buffer when split.
        self.external_states = states is not None
        if states is None and self.splits > 1:
            states = StateBuffer(self.splits, B * HQ, D, q.device)
        self.states = states
        self.slot_offset = slot_offset
        self.write_final = states is None
        self.merge = None
        if self.states is not None and not self.external_states:
            self.merge = MergePlan(self.states, out, tune=tune, sm_count=sm_count)

    def launch_partial(self):
        st = self.states
        o_state = st.o if st is not None else self.out
        lse_state = st.lse if st is not None else self.out
        grid = (self.B * self.HKV, self.splits)
        paged_decode_kernel[grid](
            self.q, self.k, self.v, self.bt, self.seq_lens, o_state, lse_state, self.out,
            self.scale_log2, self.bt.stride(0), self.k.stride(0), self.k.stride(1), self.k.stride(2),
            self.B * self.HQ, self.slot_offset, self.tps,
            HKV=self.HKV, G=self.G, BLOCK_G=max(16, triton.next_power_of_2(self.G)), D=self.D,
            PAGE_SIZE=self.PS, BLOCK_N=self.block_n, WRITE_FINAL=self.write_final,
            DOT_DTYPE=dot_dtype(self.q.dtype), HEAD_MAJOR=self.tune.decode_head_major,
            num_warps=self.warps, num_stages=self.stages,
        )

    def __call__(self):
        self.launch_partial()
        if self.merge is not None:
            self.merge()
        return self.out


class PrefixPlan:
    """Cascade prefix pass for one level: n_groups groups of seqs_per_group consecutive sequences, each
    group attending to its own shared prefix (a row of prefix_table) of prefix_len tokens."""

    def __init__(self, q, k_cache, v_cache, prefix_table, prefix_len, seqs_per_group, n_groups, states: StateBuffer,
                 *, sm_count, slot_offset=0, first_seq=0, tune: TuneParams = DEFAULT_TUNE, sm_scale=None,
                 force_splits: int | None = None):
        B, HQ, D = q.shape
        _, PS, HKV, _ = k_cache.shape
        self.q, self.k, self.v, self.bt, self.states = q, k_cache, v_cache, prefix_table, states
        self.HQ, self.HKV, self.D, self.PS, self.G = HQ, HKV, D, PS, HQ // HKV
        self.prefix_len, self.n, self.n_groups, self.first_seq = prefix_len, seqs_per_group, n_groups, first_seq
        self.tune = tune
        self.scale_log2 = _scale_log2(D, sm_scale)
        rows = seqs_per_group * self.G
        self.block_m = prefix_block_m(rows, tune.prefix_max_block_m)
        self.m_tiles = _ceil_div(rows, self.block_m)
        if force_splits is not None:
            tps = _ceil_div(_ceil_div(prefix_len, force_splits), tune.prefix_block_n) * tune.prefix_block_n
            self.splits, self.tps = _ceil_div(prefix_len, tps), tps
        else:
            self.splits, self.tps = choose_splits_waves(self.m_tiles * HKV * n_groups, prefix_len, sm_count,
                                                        tune.prefix_block_n, min_tokens=tune.min_tokens_per_split,
                                                        target_per_sm=tune.prefix_programs_per_sm)
        self.slot_offset = slot_offset
        assert slot_offset + self.splits <= states.num_slots

    def __call__(self):
        grid = (self.m_tiles, self.HKV * self.n_groups, self.splits)
        prefix_kernel[grid](
            self.q, self.k, self.v, self.bt, self.states.o, self.states.lse,
            self.scale_log2, self.bt.stride(0), self.k.stride(0), self.k.stride(1), self.k.stride(2),
            self.states.rows, self.slot_offset, self.n, self.first_seq, self.prefix_len, self.tps,
            HKV=self.HKV, G=self.G, D=self.D, PAGE_SIZE=self.PS, BLOCK_M=self.block_m,
            BLOCK_N=self.tune.prefix_block_n, DOT_DTYPE=dot_dtype(self.q.dtype), num_warps=self.tune.prefix_warps,
            num_stages=self.tune.prefix_stages,
        )


class MergePlan:
    """Merge all slots [0, num_slots) of a StateBuffer into out ([rows, D] view), optionally the LSE too."""

    def __init__(self, states: StateBuffer, out, *, num_slots: int | None = None, lse_out=None,
                 tune: TuneParams = DEFAULT_TUNE, sm_count: int = 132):
        self.states, self.out, self.lse_out = states, out, lse_out
        self.num_slots = states.num_slots if num_slots is None else num_slots
        self.D = states.o.shape[-1]
        self.block_d = min(tune.merge_block_d, self.D)
        self.stages = tune.merge_stages
        col_blocks = _ceil_div(self.D, self.block_d)
        br = tune.merge_block_r  # shrink the row block until there are >= 4 programs per SM
        while br > 1 and _ceil_div(states.rows, br) * col_blocks < 4 * sm_count:
            br //= 2
        self.block_r = br

    def __call__(self):
        rows = self.states.rows
        grid = (_ceil_div(rows, self.block_r), _ceil_div(self.D, self.block_d))
        merge_kernel[grid](
            self.states.o, self.states.lse, self.out, self.lse_out if self.lse_out is not None else self.states.lse,
            self.num_slots, rows, D=self.D, BLOCK_R=self.block_r, BLOCK_D=self.block_d,
            WRITE_LSE=self.lse_out is not None, num_warps=4, num_stages=self.stages,
        )
        return self.out


class CascadePlan:
    """Prefix level(s) + suffix pass + one merge.

    levels: list of (prefix_table [n_groups, pages], prefix_len, seqs_per_group, n_groups); each level's
    groups cover all B sequences in order. The suffix pass reads suffix_table/suffix_lens (private pages).
    """

    def __init__(self, q, k_cache, v_cache, levels, suffix_table, suffix_lens, max_suffix_len, out, *, sm_count,
                 tune: TuneParams = DEFAULT_TUNE, sm_scale=None):
        B, HQ, D = q.shape
        self.out = out
        # size the slots: the split count of each pass is known before any buffer exists.
        prefix_splits = []
        for (table, plen, n, ng) in levels:
            rows = n * (HQ // k_cache.shape[2])
            bm = prefix_block_m(rows, tune.prefix_max_block_m)
            s, _ = choose_splits_waves(_ceil_div(rows, bm) * k_cache.shape[2] * ng, plen, sm_count,
                                       tune.prefix_block_n, min_tokens=tune.min_tokens_per_split,
                                       target_per_sm=tune.prefix_programs_per_sm)
            prefix_splits.append(s)
        if max_suffix_len > 0:
            suffix_splits, _ = choose_splits(B * k_cache.shape[2], max_suffix_len, sm_count, tune.decode_block_n,
                                             min_tokens=tune.min_tokens_per_split,
                                             target_per_sm=tune.target_programs_per_sm)
        else:
            suffix_splits = 0
        n_slots = sum(prefix_splits) + suffix_splits
        self.states = StateBuffer(n_slots, B * HQ, D, q.device)
        self.prefix_plans = []
        slot = 0
        for (table, plen, n, ng), s in zip(levels, prefix_splits):
            p = PrefixPlan(q, k_cache, v_cache, table, plen, n, ng, self.states, sm_count=sm_count,
                           slot_offset=slot, tune=tune, sm_scale=sm_scale)
            assert p.splits == s
            self.prefix_plans.append(p)
            slot += s
        self.suffix_plan = None
        if suffix_splits:
            self.suffix_plan = DecodePlan(q, k_cache, v_cache, suffix_table, suffix_lens, max_suffix_len, out,
                                          sm_count=sm_count, tune=tune, sm_scale=sm_scale, states=self.states,
                                          slot_offset=slot)
            assert self.suffix_plan.splits == suffix_splits
        self.merge_plan = MergePlan(self.states, out.view(B * HQ, D), tune=tune, sm_count=sm_count)
        self.side_stream = None
        if tune.cascade_concurrent and self.suffix_plan is not None and q.is_cuda:
            self.side_stream = torch.cuda.Stream(device=q.device)

    @property
    def num_slots(self) -> int:
        return self.states.num_slots

    def run_prefix(self):
        for p in self.prefix_plans:
            p()

    def run_suffix(self):
        if self.suffix_plan is not None:
            self.suffix_plan.launch_partial()

    def run_merge(self):
        self.merge_plan()

    def run_passes(self):
        """Prefix level(s) and suffix pass; on CUDA the suffix runs on a second stream so that the memory-bound
        suffix overlaps the (often compute-bound) prefix pass; inside a CUDA graph these become parallel branches."""
        if self.side_stream is None:
            self.run_prefix()
            self.run_suffix()
            return
        main = torch.cuda.current_stream(self.out.device)
        self.side_stream.wait_stream(main)
        self.run_prefix()
        with torch.cuda.stream(self.side_stream):
            self.run_suffix()
        main.wait_stream(self.side_stream)

    def __call__(self):
        self.run_passes()
        self.run_merge()
        return self.out
