"""What the Gluon decodes (gluon_decode, gluon_decode_swap) share: the names of two Gluon builtins across Triton
versions, and a tile's cache offsets through the block table."""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy as cp

# Triton 3.6 (the device's) names the async copy async_copy_global_to_shared; 3.9 (CI's) async_load
# and the program's barrier thread_barrier, 3.9 barrier
async_copy_to_shared = getattr(cp, "async_load", None) or cp.async_copy_global_to_shared
cta_barrier = getattr(gl, "thread_barrier", None) or gl.barrier


@gluon.jit
def tile_offsets(bt_row, t, end, stride_kp, stride_kt, h_off, PAGE_SIZE: gl.constexpr):
    """Cache offsets (int64) of tokens t ([lanes, keys]) through a block-table row; 0 at or past `end`, whose entries
    are not read."""
    valid = t < end
    tu = gl.where(valid, t, 0).to(gl.uint32)
    page = gl.load(bt_row + (tu // PAGE_SIZE).to(gl.int32), mask=valid, other=0)
    return page.to(gl.int64) * stride_kp + (tu % PAGE_SIZE).to(gl.int64) * stride_kt + h_off


@gluon.jit
def copy_tile(buf, base_ptr, off, t, end, offs_d, D: gl.constexpr):
    """Start copying one tile's K or V (tokens t, [lanes, keys], at cache offsets off) into buf as one commit group;
    tokens at or past `end` are zero-filled."""
    msk = (t < end)[:, :, None] & (offs_d < D)[None, None, :]
    async_copy_to_shared(buf, base_ptr + off[:, :, None] + offs_d[None, None, :], mask=msk)
    cp.commit_group()


@gluon.jit
def copy_first_tiles(k_buf, v_buf, k_ptr, v_ptr, bt_row, start, end, tok_tile, offs_d, stride_kp, stride_kt, h_off,
                     PAGE_SIZE: gl.constexpr, BLOCK_N: gl.constexpr, NBUF: gl.constexpr, D: gl.constexpr):
    """Copy the first NBUF tiles' K and V (tile j's into buffer j, K before V), and return the offsets of the tile
    after them: the loop's copies use each tile's offsets an iteration after their page numbers were loaded."""
    for j in gl.static_range(NBUF):
        t_j = start + j * BLOCK_N + tok_tile
        off = tile_offsets(bt_row, t_j, end, stride_kp, stride_kt, h_off, PAGE_SIZE)
        copy_tile(k_buf.index(j), k_ptr, off, t_j, end, offs_d, D)
        copy_tile(v_buf.index(j), v_ptr, off, t_j, end, offs_d, D)
    return tile_offsets(bt_row, start + NBUF * BLOCK_N + tok_tile, end, stride_kp, stride_kt, h_off, PAGE_SIZE)


@gluon.jit
def softmax_update(s, m_i, l_i, acc, KEY_AXIS: gl.constexpr):
    """One tile's online-softmax step in each lane over scaled scores s (log2 units; masked keys -inf), whose keys
    lie along KEY_AXIS, as do the accumulator's rows' weights: (P, max, sum, rescaled accumulator)."""
    m_new = gl.maximum(m_i, gl.max(s, axis=KEY_AXIS))
    m_use = gl.where(m_new == float("-inf"), 0.0, m_new)     # a lane that has seen no key yet
    alpha = gl.exp2(m_i - m_use)
    p = gl.exp2(s - gl.expand_dims(m_use, KEY_AXIS))
    return p, m_new, l_i * alpha + gl.sum(p, axis=KEY_AXIS), acc * gl.expand_dims(alpha, KEY_AXIS)


@gluon.jit
def merge_lanes(m_i, l_i, acc, KEY_AXIS: gl.constexpr):
    """The lanes' (warps') states of the same rows merged: (max, sum, weighted accumulator summed over the lanes)."""
    m_all = gl.max(m_i, axis=0)
    w = gl.exp2(m_i - gl.where(m_all == float("-inf"), 0.0, m_all)[None, :])
    return m_all, gl.sum(l_i * w, axis=0), gl.sum(acc * gl.expand_dims(w, KEY_AXIS), axis=0)


@gluon.jit
def program_range(seq_lens_ptr, bt_ptr, stride_bt, stride_kh, tokens_per_split, HKV: gl.constexpr):
    """This program's (sequence, KV head, split, first token, end, block-table row, head offset): one program per
    (sequence, KV head, split), the last split running to its sequence's end (a launch of fewer splits than the
    tokens need gives it the rest)."""
    pid = gl.program_id(0)
    split = gl.program_id(1)
    b = pid // HKV
    h = pid % HKV
    start = split * tokens_per_split
    stop = gl.where(split == gl.num_programs(1) - 1, 2147483647, start + tokens_per_split)
    end = gl.minimum(stop, gl.load(seq_lens_ptr + b))
    return b, h, split, start, end, bt_ptr + b.to(gl.int64) * stride_bt, h * stride_kh


@gluon.jit
def lane_keys(layout: gl.constexpr, WARPS: gl.constexpr, NW: gl.constexpr):
    """A tile's keys [lanes, keys] in `layout` (a 2-D slice): lane w holds keys w * NW to w * NW + NW - 1."""
    w = gl.arange(0, WARPS, layout=gl.SliceLayout(1, layout))
    n = gl.arange(0, NW, layout=gl.SliceLayout(0, layout))
    return w[:, None] * NW + n[None, :]
