"""The Gluon decode's own launch (kernels_probe/attention/gluon_decode.py), every option of its kernels open: what
benchmarks/decode_gluon_check.py times. The probe's launches reach the kernel through triton_plans.DecodePlan
(TuneParams.decode_gluon)."""

from __future__ import annotations

from cascade_plan.own_kernel_launch import persistent_programs
from kernels_probe.attention.gluon_decode import gluon_decode_constants, gluon_decode_kernel
from kernels_probe.attention.gluon_decode_persist import (
    capped_programs,
    gluon_decode_persist_kernel,
    gluon_persist_constants,
)


class GluonDecode:
    """One launch of the Gluon decode over a paged cache, and the merge of its splits: calling it writes `out`
    ([batch, num_q_heads, head_dim]). `splits` splits each sequence's tokens into ranges of whole tiles; `persist`
    (unsplit only) launches the persistent kernel (gluon_decode_persist), persist programs an SM at most, with a
    copy of q a lane or one (q_lanes; None: persist_q_lanes decides); a split
    launch merges its splits in the program that stores an item's last split (fused_merge) or in a merge kernel
    after it."""

    def __init__(self, q, k_cache, v_cache, block_table, seq_lens, max_seq_len: int, out, *, sm_count: int,
                 splits: int = 1, block_n: int = 64, warps: int = 4, nbuf: int = 1, q_smem: bool = False,
                 v_widen: bool = False, maxnreg: int | None = None, swap: bool = False, persist: int = 0,
                 fused_merge: bool = True, q_lanes: bool | None = None, sm_scale: float | None = None):
        import torch

        from cascade_plan.own_kernel_launch import scale_log2, whole_tile_splits
        from kernels_probe.attention.triton_plans import MergePlan, StateBuffer, dot_dtype

        B, HQ, D = q.shape
        _, PS, HKV, _ = k_cache.shape
        self.q, self.k, self.v, self.bt, self.seq_lens, self.out = q, k_cache, v_cache, block_table, seq_lens, out
        self.grid_items = B * HKV
        self.splits, self.tps = whole_tile_splits(max(max_seq_len, 1), max(splits, 1), block_n)
        self.warps = warps
        self.launch_opts = {"num_warps": warps, **({"maxnreg": maxnreg} if maxnreg else {})}
        self.scale_log2 = scale_log2(D, sm_scale)
        self.rows = B * HQ
        dt = dot_dtype(q.dtype, k_cache.dtype)
        fp8 = k_cache.element_size() == 1
        self.persist = persist
        if persist:
            if self.splits > 1 or q_smem or v_widen:
                raise ValueError("the persistent Gluon decode runs unsplit, q from its copies, V unwidened")
            # at most persist programs an SM; capped at the first call, once the kernel's registers are known
            self.programs = persistent_programs(self.grid_items, sm_count, persist)
            self.sm_count, self.capped = sm_count, False
            self.const = gluon_persist_constants(HKV, HQ // HKV, D, PS, block_n, warps, dt, fp8=fp8, nbuf=nbuf,
                                                 swap=swap, q_lanes=q_lanes)
            self.states = self.merge = None
            return
        self.const = gluon_decode_constants(HKV, HQ // HKV, D, PS, block_n, warps, self.splits == 1, dt, fp8=fp8,
                                            nbuf=nbuf, q_smem=q_smem, v_widen=v_widen, fused_merge=fused_merge,
                                            swap=swap)
        self.states = StateBuffer(self.splits, self.rows, D, q.device) if self.splits > 1 else None
        self.merge = (MergePlan(self.states, out.view(self.rows, D), sm_count=sm_count)
                      if self.states is not None and not self.const["FUSED_MERGE"] else None)
        # the fused merge's counts: each item's splits count themselves, and the last sets its count back to zero
        self.counts = torch.zeros(self.grid_items, dtype=torch.int32, device=q.device)
        self._dummy = torch.empty(1, dtype=torch.float32, device=q.device)

    def __call__(self):
        if self.persist:
            args = (self.q, self.k, self.v, self.bt, self.seq_lens, self.out, self.scale_log2, self.bt.stride(0),
                    self.k.stride(0), self.k.stride(1), self.k.stride(2), self.grid_items)
            if not self.capped:
                self.programs = capped_programs(args, self.const, self.launch_opts, self.grid_items, self.sm_count,
                                                self.persist)
                self.capped = True
            gluon_decode_persist_kernel[(self.programs,)](*args, **self.const, **self.launch_opts)
            return self.out
        o_state = self.states.o if self.states is not None else self._dummy
        lse_state = self.states.lse if self.states is not None else self._dummy
        gluon_decode_kernel[(self.grid_items, self.splits)](
            self.q, self.k, self.v, self.bt, self.seq_lens, o_state, lse_state, self.out, self.counts, self.scale_log2,
            self.bt.stride(0), self.k.stride(0), self.k.stride(1), self.k.stride(2), self.rows, 0, self.tps,
            **self.const, **self.launch_opts)
        if self.merge is not None:
            self.merge()
        return self.out
