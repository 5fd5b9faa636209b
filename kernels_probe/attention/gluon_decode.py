"""The per-sequence decode written in Gluon (Triton's explicit-layout dialect): K and V in buffers of their own,
each waited for on its own, as FlashInfer's decode orders them.

Why: compiled by Triton's pipeliner, our decode (``triton_jit.paged_decode_kernel``) gives a tile's K and V one
stage, so each tile waits at the loop's head for both copies (one buffer each at head dim 256: the counters put half
its stall samples on that barrier). Here the loop is written out: wait for this tile's K, S = q K^T, copy the next
tile's K into the buffer just read, the softmax, wait for this tile's V, acc += P V, copy the next tile's V. Each copy
then lands under half a tile of math, with one buffer each. The keys of a tile are split between the warps (lanes):
each warp keeps its own running max, sum and accumulator over its slice (a batched dot whose batch is the warp), so
no tile reduces across warps; the lanes merge once, at the end.

Layout as ``triton_jit``: caches ``[num_pages, page_size, num_kv_heads, head_dim]``, ``q [batch, num_q_heads,
head_dim]``, one block-table row per sequence. One program per (sequence, KV head, split); a split launch writes
(o, lse) states that its last split merges (FUSED_MERGE) or ``triton_merge.merge_kernel`` does after it.

The form that ran on a GPU (benchmarks/raw/device-2026-12-08): one buffer each, q in registers, a bf16 cache; the
probe reaches it only in that form (TuneParams.decode_gluon). Compiled on the CPU, never yet run: NBUF buffers each,
q in shared memory (Q_SMEM), an fp8 cache read four values a 32-bit word (K_WIDTH 4) with V widened through registers
(V_WIDEN), the transposed dots (SWAP) and the merge in the last split.

Gluon does not run under TRITON_INTERPRET: CI compiles this kernel for sm_90 on the CPU (``compile_gluon_decode``);
its results are checked against float32 on a GPU only (``benchmarks/decode_gluon_check.py``)."""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy as cp
from triton.experimental.gluon.language.nvidia.ampere import mma_v2

from kernels_probe.attention.gluon_common import (
    copy_first_tiles,
    copy_tile,
    cta_barrier,
    lane_keys,
    merge_if_last,
    merge_lanes,
    program_range,
    softmax_update,
    store_item_rows,
    tile_offsets,
)

BLOCK_G = 16      # query rows of a KV head, padded to one MMA's M
SWAP_MAX_G = 8    # query heads per KV head the transposed dots hold: one MMA's N


@gluon.jit(do_not_specialize=["stride_bt", "rows_total", "slot_offset", "tokens_per_split"])
def gluon_decode_kernel(
    q_ptr, k_ptr, v_ptr, bt_ptr, seq_lens_ptr, o_state_ptr, lse_state_ptr, out_ptr, counter_ptr,
    sm_scale_log2, stride_bt, stride_kp, stride_kt, stride_kh, rows_total, slot_offset, tokens_per_split,
    HKV: gl.constexpr, G: gl.constexpr, D: gl.constexpr, PAGE_SIZE: gl.constexpr, BLOCK_N: gl.constexpr,
    WRITE_FINAL: gl.constexpr, WARPS: gl.constexpr, COPY_TN: gl.constexpr, COPY_TD: gl.constexpr,
    DOT_DTYPE: gl.constexpr, NBUF: gl.constexpr, Q_SMEM: gl.constexpr, K_WIDTH: gl.constexpr, COPY_VEC: gl.constexpr,
    V_WIDEN: gl.constexpr, FUSED_MERGE: gl.constexpr, SWAP: gl.constexpr,
):
    # SWAP: the transposed dots (S^T = K q^T, acc^T += V^T P^T): a tile's keys are the dots' M (16 a warp) and the
    # query heads their N, padded to 8 (one MMA's N) where the untransposed dots pad them to 16 (one MMA's M). Half
    # the MMAs for the same bytes, and each warp's accumulator is [head dims, 8]: at head dim 256, 64 registers a
    # thread where the untransposed one holds 128. A1 x A2: the accumulator, S1 x S2: S
    BG: gl.constexpr = 8 if SWAP else 16     # SWAP_MAX_G, BLOCK_G
    NW: gl.constexpr = BLOCK_N // WARPS      # keys of a tile per lane (warp)
    KEY_AXIS: gl.constexpr = 1 if SWAP else 2
    A1: gl.constexpr = D if SWAP else BG
    A2: gl.constexpr = BG if SWAP else D
    S1: gl.constexpr = NW if SWAP else BG
    S2: gl.constexpr = BG if SWAP else NW
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=[WARPS, 1, 1],
                                                  instr_shape=[1, 16, 8])
    # K_WIDTH: 2 over a bf16 cache; 4 over fp8, so that a thread reads 32 bits of fp8 from shared memory at once
    op_a: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=mma, k_width=K_WIDTH)
    op_b: gl.constexpr = gl.DotOperandLayout(operand_index=1, parent=mma, k_width=K_WIDTH)
    # copies: 16 bytes a thread along the head dims (COPY_VEC elements), each warp its own lane's keys
    cpl: gl.constexpr = gl.BlockedLayout([1, 1, COPY_VEC], [1, COPY_TN, COPY_TD], [WARPS, 1, 1], [2, 1, 0])
    tok_l: gl.constexpr = gl.SliceLayout(2, cpl)
    smem_l: gl.constexpr = gl.SwizzledSharedLayout(COPY_VEC, 1, 8, [2, 1, 0])
    q_smem_l: gl.constexpr = gl.SwizzledSharedLayout(8, 1, 8, [2, 1, 0])
    # q^T [lanes, head dims, query heads] transposed: one thread a head dim (a one-time load)
    qt_l: gl.constexpr = gl.BlockedLayout([1, 1, BG], [1, 32, 1], [WARPS, 1, 1], [2, 1, 0])
    row_l: gl.constexpr = gl.SliceLayout(KEY_AXIS, mma)         # [lanes, query heads]
    key_l: gl.constexpr = gl.SliceLayout(3 - KEY_AXIS, mma)     # [lanes, keys]

    HQ: gl.constexpr = HKV * G
    b, h, split, start, end, bt_row, h_off = program_range(seq_lens_ptr, bt_ptr, stride_bt, stride_kh,
                                                           tokens_per_split, HKV)

    # q, the same rows in every lane
    offs_d = gl.arange(0, D, layout=gl.SliceLayout(0, gl.SliceLayout(1, cpl)))
    tok_tile = lane_keys(tok_l, WARPS, NW)                                         # [lanes, keys], cpl's slice
    if SWAP:
        qw = gl.arange(0, WARPS, layout=gl.SliceLayout(1, gl.SliceLayout(2, qt_l)))
        qd = gl.arange(0, D, layout=gl.SliceLayout(0, gl.SliceLayout(2, qt_l)))
        qg = gl.arange(0, BG, layout=gl.SliceLayout(0, gl.SliceLayout(1, qt_l)))
        q_off = ((b * HQ + h * G + qg).to(gl.int64)[None, None, :] * D + qd[None, :, None]
                 + (qw * 0).to(gl.int64)[:, None, None])
        q_mask = (qg < G)[None, None, :] & (qd < D)[None, :, None] & (qw >= 0)[:, None, None]
        q3 = gl.convert_layout(gl.load(q_ptr + q_off, mask=q_mask, other=0.0).to(DOT_DTYPE), op_b)
    else:
        offs_w = gl.arange(0, WARPS, layout=gl.SliceLayout(1, tok_l))
        offs_g3 = gl.arange(0, BG, layout=gl.SliceLayout(0, tok_l))
        q_rows = b * HQ + h * G + offs_g3
        q_off = (q_rows.to(gl.int64)[None, :, None] * D + offs_d[None, None, :]
                 + (offs_w * 0).to(gl.int64)[:, None, None])
        q_mask = (offs_g3 < G)[None, :, None] & (offs_d < D)[None, None, :] & (offs_w >= 0)[:, None, None]
        q_raw = gl.load(q_ptr + q_off, mask=q_mask, other=0.0).to(DOT_DTYPE)
        if Q_SMEM:  # q read from shared memory at each tile, as FlashInfer's decode does (ptxas hoists the reads)
            q_buf = gl.allocate_shared_memory(DOT_DTYPE, [WARPS, BG, D], q_smem_l, q_raw)
        else:
            q3 = gl.convert_layout(q_raw, op_a)

    # NBUF buffers each for K and V; tile j's in buffer j % NBUF
    k_buf = gl.allocate_shared_memory(k_ptr.dtype.element_ty, [NBUF, WARPS, NW, D], smem_l)
    v_buf = gl.allocate_shared_memory(v_ptr.dtype.element_ty, [NBUF, WARPS, NW, D], smem_l)
    off_next = copy_first_tiles(k_buf, v_buf, k_ptr, v_ptr, bt_row, start, end, tok_tile, offs_d, stride_kp,
                                stride_kt, h_off, PAGE_SIZE, BLOCK_N, NBUF, D)

    key_tile = lane_keys(key_l, WARPS, NW)                                 # [lanes, keys], mma's slice
    m_i = gl.full([WARPS, BG], float("-inf"), gl.float32, row_l)
    l_i = gl.zeros([WARPS, BG], gl.float32, row_l)
    acc = gl.zeros([WARPS, A1, A2], gl.float32, mma)
    s_zero = gl.zeros([WARPS, S1, S2], gl.float32, mma)
    n_tiles = gl.cdiv(gl.maximum(end - start, 0), BLOCK_N)
    for i in range(n_tiles):
        t0 = start + i * BLOCK_N
        slot = i % NBUF
        t_next = t0 + NBUF * BLOCK_N + tok_tile
        # in flight, oldest first: this tile's K and V, then the next NBUF - 1 tiles' K and V
        cp.wait_group(2 * NBUF - 1)     # this tile's K has landed; its V may still be on the way
        cta_barrier()
        if SWAP:
            s = mma_v2(k_buf.index(slot).load(op_a).to(DOT_DTYPE), q3, s_zero)          # S^T: [lanes, keys, heads]
        else:
            kt = k_buf.index(slot).permute((0, 2, 1)).load(op_b).to(DOT_DTYPE)
            if Q_SMEM:
                s = mma_v2(q_buf.load(op_a), kt, s_zero)
            else:
                s = mma_v2(q3, kt, s_zero)
        cta_barrier()         # every lane has read K: the buffer takes the K of the tile NBUF ahead
        copy_tile(k_buf.index(slot), k_ptr, off_next, t_next, end, offs_d, D)

        s = gl.where(gl.expand_dims(t0 + key_tile < end, 3 - KEY_AXIS), s * sm_scale_log2, float("-inf"))
        p, m_i, l_i, acc = softmax_update(s, m_i, l_i, acc, KEY_AXIS)
        p_op = gl.convert_layout(p.to(DOT_DTYPE), op_b if SWAP else op_a)

        cp.wait_group(2 * NBUF - 1)     # this tile's V has landed; the K just issued may still be on the way
        cta_barrier()
        if SWAP:
            if V_WIDEN:
                vt = gl.convert_layout(gl.permute(v_buf.index(slot).load(cpl).to(DOT_DTYPE), (0, 2, 1)), op_a)
            else:
                vt = v_buf.index(slot).permute((0, 2, 1)).load(op_a).to(DOT_DTYPE)
            acc = mma_v2(vt, p_op, acc)                                  # acc^T: [lanes, head dims, query heads]
        else:
            if V_WIDEN:    # fp8: V's head dims are the dot's N, read 16 bytes a thread and widened, then placed
                v = gl.convert_layout(v_buf.index(slot).load(cpl).to(DOT_DTYPE), op_b)
            else:
                v = v_buf.index(slot).load(op_b).to(DOT_DTYPE)
            acc = mma_v2(p_op, v, acc)
        cta_barrier()         # every lane has read V
        copy_tile(v_buf.index(slot), v_ptr, off_next, t_next, end, offs_d, D)
        off_next = tile_offsets(bt_row, t_next + BLOCK_N, end, stride_kp, stride_kt, h_off, PAGE_SIZE)
    cp.wait_group(0)

    # the lanes' states merge once
    m_all, l_all, o = merge_lanes(m_i, l_i, acc, KEY_AXIS)           # o: [rows, D], or [D, rows] transposed
    store_item_rows(o, m_all, l_all, b * HQ + h * G, out_ptr, o_state_ptr, lse_state_ptr, rows_total,
                    slot_offset + split, mma, row_l, KEY_AXIS - 1, G, D, BG, WRITE_FINAL)
    if FUSED_MERGE:     # split (never WRITE_FINAL): the split that stores last merges the item's rows
        merge_if_last(counter_ptr, b * HKV + h, o_state_ptr, lse_state_ptr, out_ptr, b * HQ + h * G, rows_total,
                      slot_offset, G, D, BG, WARPS)


def check_swap_heads(q_per_kv: int) -> None:
    """Refuse more query heads per KV head than the transposed dots hold (ValueError)."""
    if q_per_kv > SWAP_MAX_G:
        raise ValueError(f"the transposed Gluon decode holds at most {SWAP_MAX_G} query heads per KV head, "
                         f"got {q_per_kv}")


def copy_threads(head_dim: int, elem_bytes: int) -> tuple[int, int, int]:
    """(elements a thread, threads along keys, threads along head dims) of a warp's copy: 16 bytes a thread."""
    vec = 16 // elem_bytes
    td = min(head_dim // vec, 32)
    return vec, 32 // td, td


def gluon_decode_constants(num_kv_heads: int, q_per_kv: int, head_dim: int, page_size: int, block_n: int,
                           warps: int, write_final: bool, dot_dtype, *, fp8: bool = False, nbuf: int = 1,
                           q_smem: bool = False, v_widen: bool = False, fused_merge: bool = False,
                           swap: bool = False) -> dict:
    """The kernel's constexprs for one launch shape (swap: the transposed dots)."""
    if swap:
        check_swap_heads(q_per_kv)
    if q_per_kv > BLOCK_G:
        raise ValueError(f"the Gluon decode holds at most {BLOCK_G} query heads per KV head, got {q_per_kv}")
    if block_n % (warps * 16):
        raise ValueError(f"block_n {block_n} must give each of {warps} warps a multiple of 16 keys")
    vec, tn, td = copy_threads(head_dim, 1 if fp8 else 2)
    return dict(HKV=num_kv_heads, G=q_per_kv, D=head_dim, PAGE_SIZE=page_size, BLOCK_N=block_n,
                WRITE_FINAL=write_final, WARPS=warps, COPY_TN=tn, COPY_TD=td, DOT_DTYPE=dot_dtype, NBUF=nbuf,
                Q_SMEM=q_smem, K_WIDTH=4 if fp8 else 2, COPY_VEC=vec, V_WIDEN=fp8 and v_widen,
                FUSED_MERGE=fused_merge and not write_final, SWAP=swap)


def compile_gluon_decode(block_n: int = 64, warps: int = 4, *, head_dim: int = 128, q_per_kv: int = 4,
                         kv_dtype: str = "bf16", write_final: bool = True, nbuf: int = 1, q_smem: bool = False,
                         v_widen: bool = False, maxnreg: int | None = None, swap: bool = False,
                         fused_merge: bool = False, arch: int = 90):
    """The kernel compiled for one launch shape without a GPU (Triton's own ptxas), as pipelining.compile_decode
    compiles the Triton decode: CI's only check that it builds."""
    import triton.language as tl

    names = ["q_ptr", "k_ptr", "v_ptr", "bt_ptr", "seq_lens_ptr", "o_state_ptr", "lse_state_ptr", "out_ptr",
             "counter_ptr", "sm_scale_log2", "stride_bt", "stride_kp", "stride_kt", "stride_kh", "rows_total",
             "slot_offset", "tokens_per_split"]
    fp8 = kv_dtype == "fp8"
    const = gluon_decode_constants(8, q_per_kv, head_dim, 16, block_n, warps, write_final,
                                   tl.float16 if fp8 else tl.bfloat16, fp8=fp8, nbuf=nbuf, q_smem=q_smem,
                                   v_widen=v_widen, fused_merge=fused_merge, swap=swap)
    return compile_gluon(gluon_decode_kernel, names, kv_dtype, const, warps=warps, maxnreg=maxnreg,
                         arch=arch)


def compile_gluon(kernel, names: list[str], kv_dtype: str, const: dict, *, warps: int, maxnreg: int | None = None,
                  arch: int = 90):
    """A Gluon decode kernel compiled for sm_`arch` without a GPU: `names` its runtime arguments in order (pointers
    end in _ptr: q and out bf16, block table, lengths and counts int32, states float32, the caches `kv_dtype`; then
    the float scale; the rest int32), `const` its constexprs."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource

    cache = {"bf16": "*bf16", "fp8": "*fp8e4nv"}[kv_dtype]
    ptr_types = {"k_ptr": cache, "v_ptr": cache, "bt_ptr": "*i32", "seq_lens_ptr": "*i32", "o_state_ptr": "*fp32",
                 "lse_state_ptr": "*fp32", "counter_ptr": "*i32"}
    signature: dict = {n: ptr_types.get(n, "*bf16") if n.endswith("_ptr") else "fp32" if n == "sm_scale_log2"
                       else "i32" for n in names}
    signature.update({k: "constexpr" for k in const})
    aligned = [i for i, n in enumerate(names) if n.endswith("_ptr") or n in ("stride_kp", "stride_kt", "stride_kh")]
    attrs = {(i,): [["tt.divisibility", 16]] for i in aligned}
    return triton.compile(GluonASTSource(kernel, signature, constexprs=const, attrs=attrs),
                          target=GPUTarget("cuda", arch, 32), options=dict(num_warps=warps, maxnreg=maxnreg))
