"""The probe's paged-cache layout of one step point, shared by the GQA caches (step_model.StepKV) and the
MLA latent caches (moe_step.MlaKV): each group's prefix pages first (contiguous, shared by the group's
sequences through the block table), then each sequence's private pages (ceil(S / page_size))."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kernels_probe.steps.step_shapes import WorkloadStep


@dataclass(frozen=True)
class PageLayout:
    num_pages: int
    prefix_table: torch.Tensor     # [groups, prefix pages] int32: each group's shared prefix
    suffix_table: torch.Tensor     # [batch, suffix pages] int32: each sequence's private pages
    shared_table: torch.Tensor     # [batch, prefix + suffix pages] int32: what per-sequence kernels read


def page_layout(pt: WorkloadStep, page_size: int, device) -> PageLayout:
    if pt.prefix_tokens % page_size:
        raise ValueError("prefix_tokens must be a multiple of the page size")
    B, ng, n = pt.batch, pt.n_groups, pt.group_size
    pp, sp = pt.prefix_tokens // page_size, -(-pt.suffix_tokens // page_size)
    prefix_pages = ng * pp
    ar = lambda k: torch.arange(k, device=device, dtype=torch.int32)  # noqa: E731
    prefix_table = (ar(ng)[:, None] * pp + ar(pp)[None, :]).contiguous()
    suffix_table = (prefix_pages + ar(B)[:, None] * sp + ar(sp)[None, :]).contiguous()
    shared_table = torch.cat([prefix_table[ar(B).long() // n], suffix_table], dim=1).contiguous()
    return PageLayout(prefix_pages + B * sp, prefix_table, suffix_table, shared_table)
