"""Triton kernels that merge attention states (``(o, lse)`` slots, see ``triton_jit``) into a final output: the
merge kernels the launch plans run after split passes, and the merge one decode program runs for its own rows
once it is the last of their splits to finish (``merge_seq_rows``)."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _store_merged(acc, den, m, rows, mask_r, offs_d, out_ptr, lse_out_ptr, D: tl.constexpr, WRITE_LSE: tl.constexpr):
    """A merge's epilogue: the weighted sum over its denominator (max LSE m), and the merged LSE if asked."""
    den_safe = tl.where(den > 0.0, den, 1.0)
    tl.store(out_ptr + rows[:, None].to(tl.int64) * D + offs_d[None, :], (acc / den_safe[:, None]).to(
        out_ptr.dtype.element_ty), mask=mask_r[:, None])
    if WRITE_LSE:
        if tl.program_id(1) == 0:
            m_fin = tl.where(m == float("-inf"), 0.0, m)
            tl.store(lse_out_ptr + rows, tl.where(den > 0.0, m_fin + tl.log(den_safe), float("-inf")), mask=mask_r)


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
    _store_merged(acc, den, m, rows, mask_r, offs_d, out_ptr, lse_out_ptr, D, WRITE_LSE)


@triton.jit(do_not_specialize=["num_slots", "rows_total"])
def merge_slots_kernel(
    o_state_ptr,
    lse_state_ptr,
    out_ptr,
    lse_out_ptr,
    num_slots,
    rows_total,
    D: tl.constexpr,
    BLOCK_R: tl.constexpr,
    BLOCK_S: tl.constexpr,
    BLOCK_D: tl.constexpr,
    WRITE_LSE: tl.constexpr,
):
    """The merge for many slots and few rows (split-K over a long context at small batch): BLOCK_S slots are
    loaded at once as one [BLOCK_R, BLOCK_S, BLOCK_D] tile instead of one slot per dependent iteration; the max
    LSE over all slots first, then the weighted sum. Same result as merge_kernel."""
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    offs_d = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    offs_s = tl.arange(0, BLOCK_S)
    mask_r = rows < rows_total
    m = tl.full([BLOCK_R], float("-inf"), tl.float32)
    for s0 in range(0, num_slots, BLOCK_S):
        s = s0 + offs_s
        msk = mask_r[:, None] & (s < num_slots)[None, :]
        lse = tl.load(lse_state_ptr + s[None, :].to(tl.int64) * rows_total + rows[:, None], mask=msk,
                      other=float("-inf"))
        m = tl.maximum(m, tl.max(lse, 1))
    m_safe = tl.where(m == float("-inf"), 0.0, m)
    acc = tl.zeros([BLOCK_R, BLOCK_D], tl.float32)
    den = tl.zeros([BLOCK_R], tl.float32)
    for s0 in range(0, num_slots, BLOCK_S):
        s = s0 + offs_s
        msk = mask_r[:, None] & (s < num_slots)[None, :]
        srow = s[None, :].to(tl.int64) * rows_total + rows[:, None]
        w = tl.exp(tl.load(lse_state_ptr + srow, mask=msk, other=float("-inf")) - m_safe[:, None])
        o = tl.load(o_state_ptr + srow[:, :, None] * D + offs_d[None, None, :], mask=msk[:, :, None], other=0.0)
        acc += tl.sum(w[:, :, None] * o, 1)
        den += tl.sum(w, 1)
    _store_merged(acc, den, m, rows, mask_r, offs_d, out_ptr, lse_out_ptr, D, WRITE_LSE)


@triton.jit
def merge_seq_rows(o_state_ptr, lse_state_ptr, out_ptr, row0, rows_total, slot0, num_slots, G: tl.constexpr,
                   MG: tl.constexpr, MS: tl.constexpr, D: tl.constexpr):
    """Merge the G rows row0 .. row0 + G - 1 over slots slot0 .. slot0 + num_slots - 1 into out (the decode's
    fused merge): the max LSE first, then the weighted sum, MS slots of MG (G padded to a power of two) rows at a
    time, as merge_slots_kernel does. The states were written by other programs of the running launch: the loads
    bypass L1 (.cg), which is not coherent across SMs."""
    offs_r = tl.arange(0, MG)
    offs_s = tl.arange(0, MS)
    offs_d = tl.arange(0, D)
    rows = row0 + offs_r
    mask_r = offs_r < G
    m = tl.full([MG], float("-inf"), tl.float32)
    for s0 in tl.range(0, num_slots, MS, num_stages=1):
        s = s0 + offs_s
        msk = mask_r[:, None] & (s < num_slots)[None, :]
        srow = (slot0 + s)[None, :].to(tl.int64) * rows_total + rows[:, None]
        lse = tl.load(lse_state_ptr + srow, mask=msk, other=float("-inf"), cache_modifier=".cg")
        m = tl.maximum(m, tl.max(lse, 1))
    m_safe = tl.where(m == float("-inf"), 0.0, m)
    acc = tl.zeros([MG, D], tl.float32)
    den = tl.zeros([MG], tl.float32)
    for s0 in tl.range(0, num_slots, MS, num_stages=1):
        s = s0 + offs_s
        msk = mask_r[:, None] & (s < num_slots)[None, :]
        srow = (slot0 + s)[None, :].to(tl.int64) * rows_total + rows[:, None]
        w = tl.exp(tl.load(lse_state_ptr + srow, mask=msk, other=float("-inf"), cache_modifier=".cg") -
                   m_safe[:, None])
        o = tl.load(o_state_ptr + srow[:, :, None] * D + offs_d[None, None, :], mask=msk[:, :, None], other=0.0,
                    cache_modifier=".cg")
        acc += tl.sum(w[:, :, None] * o, 1)
        den += tl.sum(w, 1)
    den_safe = tl.where(den > 0.0, den, 1.0)
    tl.store(out_ptr + rows[:, None].to(tl.int64) * D + offs_d[None, :],
             (acc / den_safe[:, None]).to(out_ptr.dtype.element_ty), mask=mask_r[:, None])
