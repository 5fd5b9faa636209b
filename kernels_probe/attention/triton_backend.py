"""Our Triton kernels as a probe backend: per-sequence decode over shared and over duplicated prefix
pages, and the cascade (prefix level(s), suffix pass, one merge) with each of its pieces timed alone. A
three-level tree's cascade has two prefix levels: the root (every sequence one group), then the group prefixes."""

from __future__ import annotations

import torch

from cascade_plan.own_kernel_pages import launch_shared_tokens
from cascade_plan.own_kernel_tune import DEFAULT_TUNE, TuneParams
from kernels_probe.attention.data import AttentionInputs
from kernels_probe.attention.grid import AttentionConfig
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


def shared_launch_tokens(cfg: AttentionConfig, tune: TuneParams) -> int | None:
    """The shared prefix a configuration's decode over shared pages tells its launch rules: the root's and its
    group's tokens, counted only where a group holds two or more sequences (launch_shared_tokens)."""
    return launch_shared_tokens(cfg.root_tokens + cfg.prefix_tokens, cfg.group_size, tune)


def plans(data: AttentionInputs, *, sm_count: int, tune: TuneParams = DEFAULT_TUNE):
    """(decode over shared pages, decode over duplicated pages or None, cascade): the plans one configuration's rows
    time, each writing its own output."""
    cfg = data.cfg
    T = cfg.context_tokens
    dec_s = DecodePlan(data.q, data.k_cache, data.v_cache, data.shared_table, data.seq_lens, T,
                       torch.empty_like(data.q), sm_count=sm_count, tune=tune,
                       shared_prefix_tokens=shared_launch_tokens(cfg, tune))
    dec_d = None
    if data.has_dup:
        dec_d = DecodePlan(data.q, data.k_cache, data.v_cache, data.dup_table, data.seq_lens, T,
                           torch.empty_like(data.q), sm_count=sm_count, tune=tune, shared_prefix_tokens=0)
    casc = CascadePlan(data.q, data.k_cache, data.v_cache, cascade_levels(data), data.suffix_table, data.suffix_lens,
                       cfg.suffix_tokens, torch.empty_like(data.q), sm_count=sm_count, tune=tune)
    return dec_s, dec_d, casc


def timed_kernels(data: AttentionInputs, *, sm_count: int, tune: TuneParams = DEFAULT_TUNE) -> BackendKernels:
    cfg = data.cfg
    out: BackendKernels = []
    dec_s, dec_d, casc = plans(data, sm_count=sm_count, tune=tune)
    out.append(TimedKernel(BACKEND, "decode_shared", dec_s, check=poisoned_run(dec_s.out, dec_s), keep_output=True,
                           launch=dec_s.launch_record))
    if dec_d is not None:
        out.append(TimedKernel(BACKEND, "decode_dup", dec_d, check=poisoned_run(dec_d.out, dec_d), keep_output=True,
                               launch=dec_d.launch_record))
    else:
        out.append(SkippedKernel(BACKEND, "decode_dup", "duplicated prefix exceeds the probe's memory cap"))
    out.append(TimedKernel(BACKEND, "cascade_total", casc, check=poisoned_run(casc.out, casc), keep_output=True,
                           launch=launch_info(casc)))
    out.append(TimedKernel(BACKEND, "cascade_prefix", casc.run_prefix, launch=launch_info(casc)))
    if cfg.suffix_tokens:
        out.append(TimedKernel(BACKEND, "cascade_suffix", casc.run_suffix, launch=launch_info(casc)))
    out.append(TimedKernel(BACKEND, "cascade_merge", casc.run_merge, launch=launch_info(casc)))
    return out
