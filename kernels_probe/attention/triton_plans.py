"""Launch plans of the probe's Triton kernels (``triton_jit``): each plan chooses its split counts and tile
sizes on the host once (``cascade_plan.own_kernel_launch``), owns the state buffers it needs, and launches without
host syncs, so that it can be captured in a CUDA graph.

Attention states are ``(o, lse)`` pairs in float32 in the slots of one ``StateBuffer`` (see ``triton_jit``);
``CascadePlan`` runs the prefix level(s) and the suffix pass into slots of one buffer and merges them once.
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from cascade_plan.own_kernel_launch import (
    ceil_div,
    decode_block_g,
    decode_fused_merge,
    fused_merge_slots,
    gluon_decode_route,
    gluon_decode_tile,
    persistent_programs,
    prefix_prefetch,
    scale_log2,
    stagger_block_n,
    whole_tile_splits,
    wide_head,
)
from cascade_plan.own_kernel_pages import CHECK_CHUNK_PAGES, decode_fp8_pairs, decode_launch, tune_at_kv_dtype
from cascade_plan.own_kernel_plan import decode_launch_plan
from cascade_plan.own_kernel_prefix import prefix_launch
from cascade_plan.own_kernel_tune import DEFAULT_TUNE, TuneParams
from kernels_probe.attention.triton_jit import paged_decode_kernel, prefix_kernel
from kernels_probe.attention.triton_merge import merge_kernel, merge_slots_kernel


def dot_dtype(q_dtype, kv_dtype=None, tune: TuneParams = DEFAULT_TUNE):
    """Operand type of tl.dot: q's type on a GPU (fp16 over an fp8 cache where the tune says so); float32 under
    Triton's interpreter for bf16, whose interpreted tl.dot multiplies bf16 bit patterns as integers (Triton 3.6)."""
    if q_dtype == torch.bfloat16 and os.environ.get("TRITON_INTERPRET") == "1":
        return tl.float32
    if tune.fp8_dot_fp16 and kv_dtype == torch.float8_e4m3fn:
        return tl.float16
    return {torch.bfloat16: tl.bfloat16, torch.float16: tl.float16, torch.float32: tl.float32}[q_dtype]


def kv_pairs(kv_dtype, tune: TuneParams = DEFAULT_TUNE) -> bool:
    """Whether the cascade's prefix pass reads this cache as int16 pairs of fp8 head dims (TuneParams.fp8_pairs, its
    dots in fp16 whatever dot_dtype says): only where pairs apply everywhere (no per-launch cap: decode_fp8_pairs caps
    the per-sequence decode alone)."""
    return (kv_dtype == torch.float8_e4m3fn and tune.fp8_pairs and tune.fp8_dot_fp16
            and not tune.fp8_pairs_max_programs_per_sm)


def kv_operand(cache, pairs: bool):
    """The cache as the kernels take it: itself, or (pairs) viewed as int16, two head dims a value."""
    return cache.view(torch.int16) if pairs else cache


def _launch(kernel, grid, warmup: bool, *args, **kwargs):
    """Launch `kernel` on `grid`, or (warmup) only compile the specialisation that launch would run."""
    if warmup:
        kernel.warmup(*args, grid=grid, **kwargs)
    else:
        kernel[grid](*args, **kwargs)


class StateBuffer:
    """Float32 (o, lse) slots for `rows` rows; slots are handed out in order."""

    def __init__(self, num_slots: int, rows: int, head_dim: int, device):
        self.o = torch.empty((num_slots, rows, head_dim), dtype=torch.float32, device=device)
        self.lse = torch.empty((num_slots, rows), dtype=torch.float32, device=device)
        self.rows = rows
        self.num_slots = num_slots


class DecodePlan:
    """Per-sequence split-K paged decode: one launch (unsplit, or split and merged by its own programs) or decode +
    merge.
    shared_prefix_tokens: what consecutive sequences share at the start of their pages, as the caller knows it
    (0: private pages, as in the cascade's suffix pass; None: not known). Where page_block_seqs finds that blocks
    pay, consecutive sequences read the pages they share once (the kernel finds them in the block table)."""

    def __init__(self, q, k_cache, v_cache, block_table, seq_lens, max_seq_len, out, *, sm_count,
                 tune: TuneParams = DEFAULT_TUNE, sm_scale=None, states: StateBuffer | None = None,
                 slot_offset: int = 0, force_splits: int | None = None,
                 shared_prefix_tokens: int | None = None, streaming: bool = True):
        B, HQ, D = q.shape
        _, PS, HKV, D2 = k_cache.shape
        assert D == D2 and HQ % HKV == 0
        self.q, self.k, self.v, self.bt, self.seq_lens, self.out = q, k_cache, v_cache, block_table, seq_lens, out
        self.B, self.HQ, self.HKV, self.D, self.PS, self.G = B, HQ, HKV, D, PS, HQ // HKV
        self.fp8 = k_cache.dtype == torch.float8_e4m3fn
        # the launch rules over this cache's dtype (tune_at_kv_dtype: fp8's streaming target)
        tune = tune_at_kv_dtype(tune, "fp8" if self.fp8 else "bf16")
        self.tune = tune
        self.scale_log2 = scale_log2(D, sm_scale)
        self.work_items = B * HKV
        la = decode_launch_plan(B, HKV, self.G, max_seq_len, shared_prefix_tokens, sm_count, tune, head_dim=D,
                                force_splits=force_splits, streaming=streaming)
        self.splits, self.tps, long_tile = la.splits, la.tokens_per_split, la.long_tile
        self.block_n, self.stages, self.warps, self.prefetch = la.block_n, la.stages, la.warps, la.prefetch
        self.seqs = la.seqs
        # the tokens whose K/V loads keep their place in L2 where the tune hints loads (decode_l2_hints): the shared
        # prefix the caller told us
        self.keep_tokens = shared_prefix_tokens or 0
        # an fp8 cache read as int16 pairs of head dims, where the launch rule says so (decode_fp8_pairs)
        self.pairs = self.fp8 and decode_fp8_pairs(self.work_items, self.splits, self.seqs, D, sm_count, tune)
        self.k_op, self.v_op = kv_operand(k_cache, self.pairs), kv_operand(v_cache, self.pairs)
        self.swap_ab = tune.decode_swap_ab and not self.pairs
        # head dims on wide-head tiles: dots over halves of the head dims, registers capped (wide_head_halves,
        # wide_head_maxnreg)
        wide = wide_head(tune, D)
        self.halves = wide and tune.wide_head_halves and not self.pairs and not self.swap_ab
        self.maxnreg = (tune.wide_head_maxnreg or None) if wide else None
        # each warp its own slice of every tile (decode_lanes), where the slices make dots of 16+ keys
        self.lanes = (self.warps if tune.decode_lanes and self.block_n // self.warps >= 16
                      and not (self.pairs or self.swap_ab or self.halves) else 1)
        # the next tile's K and V loaded into registers (decode_stagger), where the dots are plain; one stage: the
        # loads are the loop's own, not the pipeliner's
        self.stagger = tune.decode_stagger and not (self.pairs or self.swap_ab or self.halves) and self.lanes == 1
        if self.stagger:
            self.stages = 1
            self.block_n = min(self.block_n, stagger_block_n(D, self.warps, tune))
        # external states: the caller merges (cascade suffix pass); else we own a buffer when split.
        # each program's choice (per sequence, KV head, split: the block size that read its shared pages, or 0),
        # written by every launch that can form blocks, so a probe row can say what its kernel did (launch_record)
        self.grouped = (torch.zeros(B * HKV * self.splits, dtype=torch.int8, device=q.device) if self.seqs > 1
                        else None)
        self.external_states = states is not None
        if states is None and self.splits > 1:
            states = StateBuffer(self.splits, B * HQ, D, q.device)
        self.states = states
        self.slot_offset = slot_offset
        self.write_final = states is None
        self.merge = None
        # where we own split states, the kernel merges them (its last program per sequence and KV head; the counts
        # return to zero as each merge ends, so a graph replays it) or a merge kernel runs after it
        self.fused_merge = (self.states is not None and not self.external_states
                            and decode_fused_merge(self.splits, self.seqs, long_tile, tune))
        self.counts = (torch.zeros(self.work_items, dtype=torch.int32, device=q.device) if self.fused_merge
                       else None)
        if self.states is not None and not self.external_states and not self.fused_merge:
            self.merge = MergePlan(self.states, out, tune=tune, sm_count=sm_count)
        # the fused merge's tile (MERGE_G, MERGE_S); 1 x 1 where the kernel does not merge, one specialisation
        self.merge_tile = fused_merge_slots(self.G, D, self.splits, self.warps) if self.fused_merge else (1, 1)
        # the Gluon decode where decode_gluon takes the launch; never under Triton's interpreter, which cannot run it
        kv_name = "fp8" if self.fp8 else "bf16" if k_cache.dtype == torch.bfloat16 else str(k_cache.dtype)
        self.gluon = (gluon_decode_route(tune, kv_dtype=kv_name, head_dim=D, q_per_kv=self.G, splits=self.splits,
                                         seqs=self.seqs, external_states=self.external_states)
                      and os.environ.get("TRITON_INTERPRET") != "1")
        # the persistent Gluon kernel's programs (0: one program per work item), capped at the first launch
        self.gluon_programs, self.gluon_capped, self.sm_count = 0, False, sm_count
        if self.gluon:
            from kernels_probe.attention.gluon_decode import gluon_decode_constants
            from kernels_probe.attention.gluon_decode_persist import gluon_persist_constants

            self.block_n, self.warps, swap = gluon_decode_tile(D)
            self.stages, self.prefetch = 1, False
            dt = dot_dtype(q.dtype, k_cache.dtype, tune)
            if tune.decode_gluon_persist > 0:
                self.gluon_programs = persistent_programs(self.work_items, sm_count, tune.decode_gluon_persist)
                self.gluon_const = gluon_persist_constants(HKV, self.G, D, PS, self.block_n, self.warps, dt,
                                                           swap=swap)
            else:
                self.gluon_const = gluon_decode_constants(HKV, self.G, D, PS, self.block_n, self.warps, True, dt,
                                                          swap=swap)

    def launch_partial(self, warmup: bool = False):
        if self.gluon:
            self._launch_gluon(warmup)
            return
        st = self.states
        o_state = st.o if st is not None else self.out
        lse_state = st.lse if st is not None else self.out
        _launch(
            paged_decode_kernel, (self.work_items, self.splits), warmup,
            self.q, self.k_op, self.v_op, self.bt, self.seq_lens, o_state, lse_state, self.out,
            self.grouped if self.grouped is not None else self.out, self.counts if self.fused_merge else self.out,
            self.scale_log2, self.bt.stride(0),
            *self.k_op.stride()[:3],
            self.B * self.HQ, self.slot_offset, self.tps, self.keep_tokens,
            HKV=self.HKV, G=self.G, BLOCK_G=decode_block_g(self.G, self.seqs), D=self.D,
            PAGE_SIZE=self.PS, BLOCK_N=self.block_n, WRITE_FINAL=self.write_final,
            DOT_DTYPE=dot_dtype(self.q.dtype, self.k.dtype, self.tune), HEAD_MAJOR=self.tune.decode_head_major,
            SEQS=self.seqs, LOG2_SEQS=self.seqs.bit_length() - 1, CHK=CHECK_CHUNK_PAGES,
            RECORD_GROUPED=self.grouped is not None, PREFETCH=self.prefetch, FUSED_MERGE=self.fused_merge,
            MERGE_G=self.merge_tile[0], MERGE_S=self.merge_tile[1], KV_PAIRS=self.pairs,
            SWAP_AB=self.swap_ab, L2_HINTS=self.tune.decode_l2_hints, HALVES=self.halves, LANES=self.lanes,
            UINDEX=self.tune.decode_unsigned_pages, STAGGER=self.stagger,
            num_warps=self.warps, num_stages=self.stages, **({"maxnreg": self.maxnreg} if self.maxnreg else {}),
        )

    def _launch_gluon(self, warmup: bool):
        """The unsplit launch decode_gluon takes: every program writes its rows of `out` (no states, no merge)."""
        from kernels_probe.attention.gluon_decode import gluon_decode_kernel
        from kernels_probe.attention.gluon_decode_persist import capped_programs, gluon_decode_persist_kernel

        if self.gluon_programs:
            args = (self.q, self.k, self.v, self.bt, self.seq_lens, self.out, self.scale_log2, self.bt.stride(0),
                    *self.k.stride()[:3], self.work_items)
            if not self.gluon_capped:     # no more programs an SM than it holds, once the registers are known
                self.gluon_programs = capped_programs(args, self.gluon_const, {"num_warps": self.warps},
                                                      self.work_items, self.sm_count, self.tune.decode_gluon_persist)
                self.gluon_capped = True
            _launch(gluon_decode_persist_kernel, (self.gluon_programs,), warmup, *args, **self.gluon_const,
                    num_warps=self.warps)
            return
        _launch(gluon_decode_kernel, (self.work_items, 1), warmup, self.q, self.k, self.v, self.bt, self.seq_lens,
                self.out, self.out, self.out, self.out, self.scale_log2, self.bt.stride(0), *self.k.stride()[:3],
                self.B * self.HQ, self.slot_offset, self.tps, **self.gluon_const, num_warps=self.warps)

    def __call__(self):
        self.launch_partial()
        if self.merge is not None:
            self.merge()
        return self.out

    def warmup(self):
        """Compile this plan's kernels without running them."""
        self.launch_partial(warmup=True)
        if self.merge is not None:
            self.merge.run(warmup=True)

    def launch_record(self) -> dict:
        """The launch as a probe row records it, after the kernel has run: splits, tokens per split, the block size
        the launch allowed (page_block_seqs), over fp8 whether it read int16 pairs (decode_fp8_pairs), and where
        blocks formed the share of (sequence, KV head, split) programs whose shared pages a block read once and the
        mean block size among them."""
        rec = {"splits": self.splits, "tokens_per_split": self.tps, "page_block_seqs": self.seqs}
        if self.tune.decode_gluon:
            rec["gluon"] = self.gluon
            if self.gluon_programs:
                rec["gluon_programs"] = self.gluon_programs
        if self.tune.page_prefetch:
            rec["page_prefetch"] = self.prefetch
        if self.tune.decode_fused_merge:
            rec["fused_merge"] = self.fused_merge
        if self.tune.fp8_pairs and self.fp8:    # (probe 1.13 on) whether an fp8 cache was read as int16 pairs
            rec["fp8_pairs"] = self.pairs
        if self.grouped is not None:
            g = self.grouped.to("cpu", torch.int32)
            inside = g[g > 0]
            rec["grouped_programs"] = float(inside.numel()) / max(g.numel(), 1)
            rec["mean_block_seqs"] = float(inside.float().mean()) if inside.numel() else 0.0
        return rec


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
        self.scale_log2 = scale_log2(D, sm_scale)
        self.block_m, self.m_tiles, self.splits, self.tps = prefix_launch(seqs_per_group, self.G, HKV, n_groups,
                                                                          prefix_len, sm_count, tune)
        self.prefetch = prefix_prefetch(seqs_per_group * self.G, tune)
        self.pairs = kv_pairs(k_cache.dtype, tune)
        self.k_op, self.v_op = kv_operand(k_cache, self.pairs), kv_operand(v_cache, self.pairs)
        if force_splits is not None:
            self.splits, self.tps = whole_tile_splits(prefix_len, force_splits, tune.prefix_block_n)
        self.slot_offset = slot_offset
        assert slot_offset + self.splits <= states.num_slots

    def __call__(self, warmup: bool = False):
        _launch(
            prefix_kernel, (self.m_tiles, self.HKV * self.n_groups, self.splits), warmup,
            self.q, self.k_op, self.v_op, self.bt, self.states.o, self.states.lse, self.scale_log2,
            self.bt.stride(0), *self.k_op.stride()[:3],
            self.states.rows, self.slot_offset, self.n, self.first_seq, self.prefix_len, self.tps,
            HKV=self.HKV, G=self.G, D=self.D, PAGE_SIZE=self.PS, BLOCK_M=self.block_m,
            BLOCK_N=self.tune.prefix_block_n, DOT_DTYPE=dot_dtype(self.q.dtype, self.k.dtype, self.tune),
            PREFETCH=self.prefetch, KV_PAIRS=self.pairs,
            num_warps=self.tune.prefix_warps,
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
        col_blocks = ceil_div(self.D, self.block_d)
        br = tune.merge_block_r  # shrink the row block until there are >= 4 programs per SM
        while br > 1 and ceil_div(states.rows, br) * col_blocks < 4 * sm_count:
            br //= 2
        self.block_r = br
        self.block_s = 0
        if self.num_slots >= tune.merge_slots_min:  # many slots: BLOCK_S at once, a [R, S, D] tile of 4K values
            self.block_s = min(tune.merge_block_s, triton.next_power_of_2(self.num_slots))
            self.block_r = max(1, min(br, 4096 // (self.block_s * self.block_d)))

    def __call__(self):
        return self.run()

    def run(self, warmup: bool = False):
        rows = self.states.rows
        grid = (ceil_div(rows, self.block_r), ceil_div(self.D, self.block_d))
        if self.block_s:
            _launch(
                merge_slots_kernel, grid, warmup, self.states.o, self.states.lse, self.out,
                self.lse_out if self.lse_out is not None else self.states.lse, self.num_slots, rows, D=self.D,
                BLOCK_R=self.block_r, BLOCK_S=self.block_s, BLOCK_D=self.block_d, WRITE_LSE=self.lse_out is not None,
                num_warps=4, num_stages=2,
            )
            return self.out
        _launch(
            merge_kernel, grid, warmup,
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
        prefix_splits = [prefix_launch(n, HQ // k_cache.shape[2], k_cache.shape[2], ng, plen, sm_count, tune)[2]
                         for (_, plen, n, ng) in levels]
        if max_suffix_len > 0:
            suffix_splits = decode_launch(B, k_cache.shape[2], HQ // k_cache.shape[2], max_suffix_len, 0, sm_count,
                                          tune, head_dim=D, streaming=False)[0]
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
                                          slot_offset=slot, shared_prefix_tokens=0, streaming=False)
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

    def warmup(self):
        """Compile every pass's kernels without running them."""
        for p in self.prefix_plans:
            p(warmup=True)
        if self.suffix_plan is not None:
            self.suffix_plan.launch_partial(warmup=True)
        self.merge_plan.run(warmup=True)
