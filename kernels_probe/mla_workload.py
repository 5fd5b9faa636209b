"""`probe --workload` for an MLA model (DeepSeek-V3 and its kind): its MLA attention shapes per GPU, measured
with FlashInfer's MLA wrapper (kernels_probe/mla.py) instead of refusing. Pure Python (no torch).

At TP t a GPU holds the whole latent (kv_lora_rank + rope dims per token, replicated on every rank) and
num_q_heads / t query heads, so the rows are MLA rows at that many heads, in the workload's KV dtype: its
prefix and group layout with the suffix of its first, middle and final decode step (exact lengths: an MLA
pass takes any, and the planner asks for exactly these), plus half and double the group size and the prefix
halved and doubled at the middle step (7 configurations, each per-sequence and cascade). Whole MLA steps and
MLA's own projection GEMMs (the low-rank q/kv and absorbed matrices) are not built by the probe: the plan's
notes say so."""

from __future__ import annotations


def mla_configs_for(scn, page_size: int = 16) -> tuple:
    from kernels_probe.mla import MlaConfig
    from kernels_probe.workload_probe import _round_up, _single_level

    m = scn.model
    if m.num_q_heads % scn.tp:
        raise ValueError(f"{m.id}: {m.num_q_heads} query heads do not divide by TP {scn.tp}")
    if not m.kv_lora_rank:
        raise ValueError(f"{m.id}: an MLA model needs kv_lora_rank")
    prefix, groups, samples, private, out = _single_level(scn.tree)
    P = _round_up(prefix, page_size)
    kw = dict(num_heads=m.num_q_heads // scn.tp, kv_lora_rank=m.kv_lora_rank, qk_rope_head_dim=m.qk_rope_head_dim,
              kv_dtype=scn.kv_dtype, page_size=page_size)
    cfgs: list = []

    def add(p, n, s):
        c = MlaConfig(prefix_tokens=p, group_size=n, n_groups=groups, suffix_tokens=s, **kw)
        if c not in cfgs:
            cfgs.append(c)

    mid = private + max(1, out // 2)
    for k in (1, max(1, out // 2), out):
        add(P, samples, private + k)
    for n in (samples // 2, samples * 2):
        if n >= 1:
            add(P, n, mid)
    for p in (P // 2, P * 2):
        if p >= page_size:
            add(_round_up(p, page_size), samples, mid)
    return tuple(cfgs), P != prefix and f"prefix {prefix} rounded up to {P} tokens (whole pages of {page_size})"


def mla_plan(scn, page_size: int = 16):
    """The WorkloadProbePlan of an MLA workload: MLA attention rows only (shape None: no GQA layer to build)."""
    from kernels_probe.workload_probe import WorkloadProbePlan

    cfgs, rounded = mla_configs_for(scn, page_size)
    notes = [f"MLA: attention measured with FlashInfer's MLA wrapper at {cfgs[0].num_heads} query heads per GPU "
             f"(TP {scn.tp}; the latent is replicated on every rank)",
             "MLA: its projection GEMMs (low-rank q/kv, absorbed matrices) and whole steps are not built by the probe"]
    if rounded:
        notes.append(rounded)
    return WorkloadProbePlan(name=scn.name, shape=None, kv_dtype=scn.kv_dtype, weight_dtype=scn.weight_dtype,
                             attention=(), gemm_m=(), steps=(), notes=tuple(notes), mla=cfgs)
