"""What the Gluon decodes (gluon_decode, gluon_decode_persist) share: the names of two Gluon builtins across Triton
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


@gluon.jit
def store_item_rows(o, m_all, l_all, row0, out_ptr, o_state_ptr, lse_state_ptr, rows_total, slot,
                    MMA: gl.constexpr, ROW_L: gl.constexpr, D_AXIS: gl.constexpr, G: gl.constexpr, D: gl.constexpr,
                    BG: gl.constexpr, WRITE_FINAL: gl.constexpr):
    """A KV head's merged rows o (MMA's slice 0: [BG, D], or [D, BG] where D_AXIS is 0; max m_all and sum l_all in
    ROW_L's slice 0) over their sums, stored to out rows row0 to row0 + G - 1 (WRITE_FINAL; a row that saw no key
    stores zeros), or as the (o, lse) state slot `slot` of those rows (lse in natural log, -inf where no key)."""
    o_l: gl.constexpr = gl.SliceLayout(0, MMA)
    has = l_all > 0.0
    l_safe = gl.where(has, l_all, 1.0)
    o = o / gl.expand_dims(gl.convert_layout(l_safe, gl.SliceLayout(D_AXIS, o_l)), D_AXIS)
    offs_g = gl.arange(0, BG, layout=gl.SliceLayout(D_AXIS, o_l))
    offs_d = gl.arange(0, D, layout=gl.SliceLayout(D_AXIS ^ 1, o_l))
    rows = gl.expand_dims(row0 + offs_g, D_AXIS)
    d2 = gl.expand_dims(offs_d, D_AXIS ^ 1)
    mask = gl.expand_dims(offs_g < G, D_AXIS) & (d2 < D)
    if WRITE_FINAL:
        gl.store(out_ptr + rows.to(gl.int64) * D + d2, o.to(out_ptr.dtype.element_ty), mask=mask)
    else:
        srow = slot.to(gl.int64) * rows_total + (row0 + offs_g)
        gl.store(o_state_ptr + gl.expand_dims(srow, D_AXIS) * D + d2, o, mask=mask)
        lse = gl.where(has, (m_all + gl.log2(l_safe)) * 0.6931471805599453, float("-inf"))
        offs_gl = gl.arange(0, BG, layout=gl.SliceLayout(0, ROW_L))
        gl.store(lse_state_ptr + slot.to(gl.int64) * rows_total + row0 + offs_gl, lse, mask=offs_gl < G)


@gluon.jit
def merge_split_rows(o_state_ptr, lse_state_ptr, out_ptr, row0, rows_total, slot0, num_slots, G: gl.constexpr,
                     D: gl.constexpr, BG: gl.constexpr, WARPS: gl.constexpr):
    """Rows row0 to row0 + G - 1 of state slots slot0 to slot0 + num_slots - 1 merged by their log-sum-exps
    (natural log, -inf for a split that saw no key) into out, one slot at a time. Other programs of the running
    launch wrote the states: the loads bypass L1 (.cg), which is not coherent across SMs."""
    ml: gl.constexpr = gl.BlockedLayout([1, 4], [1, 32], [WARPS, 1], [1, 0])
    offs_g = gl.arange(0, BG, layout=gl.SliceLayout(1, ml))
    offs_d = gl.arange(0, D, layout=gl.SliceLayout(0, ml))
    rmask = offs_g < G
    m = gl.full([BG], float("-inf"), gl.float32, gl.SliceLayout(1, ml))
    den = gl.zeros([BG], gl.float32, gl.SliceLayout(1, ml))
    acc = gl.zeros([BG, D], gl.float32, ml)
    for s in range(num_slots):
        srow = (slot0 + s).to(gl.int64) * rows_total + row0 + offs_g
        lse = gl.load(lse_state_ptr + srow, mask=rmask, other=float("-inf"), cache_modifier=".cg")
        o = gl.load(o_state_ptr + srow[:, None] * D + offs_d[None, :], mask=rmask[:, None], other=0.0,
                    cache_modifier=".cg")
        m_new = gl.maximum(m, lse)
        m_use = gl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = gl.exp(m - m_use)
        w = gl.exp(lse - m_use)
        acc = acc * alpha[:, None] + o * w[:, None]
        den = den * alpha + w
        m = m_new
    out = acc / gl.where(den > 0.0, den, 1.0)[:, None]
    gl.store(out_ptr + (row0 + offs_g).to(gl.int64)[:, None] * D + offs_d[None, :], out.to(out_ptr.dtype.element_ty),
             mask=rmask[:, None])


@gluon.jit
def merge_if_last(counter_ptr, item, o_state_ptr, lse_state_ptr, out_ptr, row0, rows_total, slot0,
                  G: gl.constexpr, D: gl.constexpr, BG: gl.constexpr, WARPS: gl.constexpr):
    """The fused merge: after this program's states are stored, it counts itself among its work item's splits;
    the program that counts last merges the item's rows (so that no merge kernel runs after the launch) and sets
    the count back to zero for the next launch. The barrier orders every warp's stores before the counting atomic
    (release); its acquire orders the merge's loads after the other programs' stores."""
    cta_barrier()
    if gl.atomic_add(counter_ptr + item, 1, sem="acq_rel") == gl.num_programs(1) - 1:
        merge_split_rows(o_state_ptr, lse_state_ptr, out_ptr, row0, rows_total, slot0, gl.num_programs(1), G, D,
                         BG, WARPS)
        gl.store(counter_ptr + item, 0)
