"""Our Triton kernels as a probe backend: per-sequence decode over shared and over duplicated prefix
pages, and the cascade (prefix level(s), suffix pass, one merge) with each of its pieces timed alone. A
three-level tree's cascade has two prefix levels: the root (every sequence one group), then the group prefixes."""

from __future__ import annotations

import torch

from cascade_plan.own_kernel_launch import DEFAULT_TUNE, TuneParams
from kernels_probe.attention.data import AttentionInputs
from kernels_probe.attention.timed import BackendKernels, SkippedKernel, TimedKernel, poisoned_run
from kernels_probe.attention.triton_plans import CascadePlan, DecodePlan

BACKEND = "triton"


def cascade_levels(data: AttentionInputs) -> list[tuple]:
    """CascadePlan's prefix levels: (table, tokens, sequences per group, groups); a tree's root comes first."""
    cfg = data.cfg
    levels = [(data.prefix_table, cfg.prefix_tokens, cfg.group_size, cfg.n_groups)]
    if cfg.root_tokens:
        levels.insert(0, (data.root_table, cfg.root_tokens, cfg.batch, 1))
    return levels


def launch_info(casc: CascadePlan) -> dict:
    """The cascade's launch shape, as its rows record it; a tree's also its levels as [tokens, sequences per
    group, groups] (two-level rows keep the keys they always had)."""
    info = {"slots": casc.num_slots, "prefix_splits": [p.splits for p in casc.prefix_plans],
            "prefix_block_m": [p.block_m for p in casc.prefix_plans],
            "suffix_splits": casc.suffix_plan.splits if casc.suffix_plan is not None else 0,
            "kernels": len(casc.prefix_plans) + (1 if casc.suffix_plan is not None else 0) + 1}
    if len(casc.prefix_plans) > 1:
        info["levels"] = [[p.prefix_len, p.n, p.n_groups] for p in casc.prefix_plans]
    return info


def timed_kernels(data: AttentionInputs, *, sm_count: int, tune: TuneParams = DEFAULT_TUNE) -> BackendKernels:
    cfg = data.cfg
    out: BackendKernels = []
    T = cfg.context_tokens
    out_ds = torch.empty_like(data.q)
    dec_s = DecodePlan(data.q, data.k_cache, data.v_cache, data.shared_table, data.seq_lens, T, out_ds,
                       sm_count=sm_count, tune=tune, shared_prefix_tokens=cfg.root_tokens + cfg.prefix_tokens)
    out.append(TimedKernel(BACKEND, "decode_shared", dec_s, check=poisoned_run(out_ds, dec_s), keep_output=True,
                           launch=dec_s.launch_record))
    if data.has_dup:
        out_dd = torch.empty_like(data.q)
        dec_d = DecodePlan(data.q, data.k_cache, data.v_cache, data.dup_table, data.seq_lens, T, out_dd,
                           sm_count=sm_count, tune=tune, shared_prefix_tokens=0)
        out.append(TimedKernel(BACKEND, "decode_dup", dec_d, check=poisoned_run(out_dd, dec_d), keep_output=True,
                               launch=dec_d.launch_record))
    else:
        out.append(SkippedKernel(BACKEND, "decode_dup", "duplicated prefix exceeds the probe's memory cap"))
    out_c = torch.empty_like(data.q)
    casc = CascadePlan(data.q, data.k_cache, data.v_cache, cascade_levels(data), data.suffix_table, data.suffix_lens,
                       cfg.suffix_tokens, out_c, sm_count=sm_count, tune=tune)
    out.append(TimedKernel(BACKEND, "cascade_total", casc, check=poisoned_run(out_c, casc), keep_output=True,
                           launch=launch_info(casc)))
    out.append(TimedKernel(BACKEND, "cascade_prefix", casc.run_prefix, launch=launch_info(casc)))
    if cfg.suffix_tokens:
        out.append(TimedKernel(BACKEND, "cascade_suffix", casc.run_suffix, launch=launch_info(casc)))
    out.append(TimedKernel(BACKEND, "cascade_merge", casc.run_merge, launch=launch_info(casc)))
    return out
