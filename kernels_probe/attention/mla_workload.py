"""`probe --workload` for an MLA model (DeepSeek-V3 and its kind): its MLA attention shapes per GPU, measured
with FlashInfer's MLA wrapper (kernels_probe/attention/mla.py) instead of refusing. Pure Python (no torch).

At TP t a GPU holds the whole latent (kv_lora_rank + rope dims per token, replicated on every rank) and
num_q_heads / t query heads, so the rows are MLA rows at that many heads, in the workload's KV dtype: its
prefix and group layout with the suffix of its first, middle and final decode step (exact lengths: an MLA
pass takes any, and the planner asks for exactly these), plus half and double the group size and the prefix
halved and doubled at the middle step (7 configurations, each per-sequence and cascade). An MLA + MoE model's
whole steps (kernels_probe/moe/moe_step.py) hold MLA's own projection GEMMs (the low-rank q/kv and absorbed
matrices); they are not timed apart: the plan's notes say so. kernels_probe/steps/workload_probe.py derives the
workload's levels and builds the plan."""

from __future__ import annotations


def mla_configs(model, tp: int, kv_dtype: str, page_size: int, prefix: int, groups: int, samples: int,
                suffixes: tuple[int, int, int], prefixes: list[int]) -> tuple:
    """MlaShapes at the workload's prefix and groups for its first/middle/final suffixes, then half and double
    the samples and the given neighbouring prefixes at the middle suffix."""
    from kernels_probe.attention.mla import MlaShape

    if model.num_q_heads % tp:
        raise ValueError(f"{model.id}: {model.num_q_heads} query heads do not divide by TP {tp}")
    if not model.kv_lora_rank:
        raise ValueError(f"{model.id}: an MLA model needs kv_lora_rank")
    kw = {"num_heads": model.num_q_heads // tp, "kv_lora_rank": model.kv_lora_rank,
          "qk_rope_head_dim": model.qk_rope_head_dim, "kv_dtype": kv_dtype, "page_size": page_size, "n_groups": groups}
    cfgs: list = []

    def add(p, n, s):
        c = MlaShape(prefix_tokens=p, group_size=n, suffix_tokens=s, **kw)
        if c not in cfgs:
            cfgs.append(c)

    for s in suffixes:
        add(prefix, samples, s)
    for n in (samples // 2, samples * 2):
        if n >= 1:
            add(prefix, n, suffixes[1])
    for p in prefixes:
        add(p, samples, suffixes[1])
    return tuple(cfgs)


def mla_notes(heads: int, tp: int, steps: bool = False) -> list[str]:
    return [(f"MLA: attention measured with FlashInfer's MLA wrapper at {heads} query heads per GPU (TP {tp}; the "
             "latent is replicated on every rank)"),
            ("MLA: its projection GEMMs (low-rank q/kv, absorbed matrices) are timed inside the whole steps only"
             if steps else
             "MLA: its projection GEMMs (low-rank q/kv, absorbed matrices) and whole steps are not built by the probe")]
