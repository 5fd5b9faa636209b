"""The launches a DecodePlan makes for a configuration under a tune, planned on shape-only inputs (nothing is
launched): the keys by which benchmarks/decode_vs_flashinfer.py's stages pick the shapes their variants change and
skip timing a variant that runs the same kernels as another."""

from __future__ import annotations


def launch_key(p, tune) -> tuple:
    """What a DecodePlan runs: its launch and the tune fields its kernels read besides the launch; two variants with
    the same key run the same kernels, so the second is not timed again."""
    return (p.splits, p.tps, p.block_n, p.stages, p.warps, p.seqs, tune.decode_head_major, tune.fp8_dot_fp16,
            p.pairs, tune.decode_swap_ab, p.prefetch, p.fused_merge, tune.merge_block_r, tune.merge_block_d,
            tune.merge_stages, tune.merge_slots_min, tune.merge_block_s, tune.decode_l2_hints, p.halves, p.maxnreg,
            p.lanes, tune.decode_unsigned_pages, p.stagger, getattr(p, "gluon", False),
            getattr(p, "gluon_programs", 0))


def plan_keys(cfg, tune, sm: int, device="cuda") -> tuple:
    """(decode over shared pages, decode over duplicated pages or None, the cascade's suffix pass or None), each as
    launch_key gives it, from the plans the Triton backend builds for `cfg` under `tune` over shape-only inputs
    (data.shape_data, as kernels_probe.attention.precompile builds them): nothing is launched."""
    from kernels_probe.attention.data import shape_data
    from kernels_probe.attention.triton_backend import plans

    dec_s, dec_d, casc = plans(shape_data(cfg, device), sm_count=sm, tune=tune)
    return tuple(None if p is None else launch_key(p, tune) for p in (dec_s, dec_d, casc.suffix_plan))


def launches_differ(cfg, variants, sm: int) -> bool:
    """Does any variant launch a different decode (either page layout) or suffix pass than the first (plan_keys)?"""
    return len({plan_keys(cfg, t, sm) for _, t in variants}) > 1
