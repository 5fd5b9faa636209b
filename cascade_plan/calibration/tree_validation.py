"""Three-level prefix trees, predicted vs measured: the probe's tree rows (a root prefix every sequence shares, a
prefix per group, a suffix per sequence; `root_tokens` > 0 in a row's config) priced the way the planner prices a
workload's tree, one attention layer at step 1, and compared per backend and kernel.

The fits never see tree rows (calibration_file.ProbeData.select leaves them out), and the planner does not
interpolate them (its measured tables are two-level), so every tree row is held out: the check is of how the
planner composes a deeper tree from two-level kernels (one prefix pass per level, every level merged)."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import numpy as np

from cascade_plan.calibration.backends import BACKENDS
from cascade_plan.calibration.holdout import is_tree
from cascade_plan.calibration_schema.attention import AttentionConfigDoc

if TYPE_CHECKING:
    from cascade_plan.calibration.calibration_file import ProbeData
    from cascade_plan.inputs.hardware import HardwareProfile
    from cascade_plan.inputs.model_spec import ModelSpec

# planner kernel -> the probe's kernel: per-sequence decode over shared pages, over private copies, the whole cascade
TREE_KERNELS = {"per_sequence": "decode_shared", "per_sequence_dup": "decode_dup", "cascade": "cascade_total"}


def layer_model(cfg: AttentionConfigDoc) -> ModelSpec:
    """One attention layer of the row's shape (the planner's attention ops read nothing else of the model)."""
    from cascade_plan.inputs.model_spec import ModelSpec

    hkv, g = cfg.num_kv_heads, cfg.q_per_kv
    return ModelSpec(id=f"layer-g{g}-kv{hkv}-d{cfg.head_dim}", source="probe tree row", num_layers=1,
                     hidden_size=hkv * g * cfg.head_dim, num_q_heads=hkv * g, num_kv_heads=hkv,
                     head_dim=cfg.head_dim, attention="gqa", kv_lora_rank=0, qk_rope_head_dim=0, total_params=1,
                     embedding_params=0, expert_params_per_layer=0, num_moe_layers=0, num_experts=0,
                     experts_per_token=0, sliding_window=None, alibi=False)


def tree_of(cfg: AttentionConfigDoc):
    """The row's batch as a workload tree: the root, `n_groups` prefixes under it, `group_size` sequences under each
    with `suffix_tokens` of their own at their first decode step (private prompt tokens + the one generated)."""
    from cascade_plan.inputs.workload import TreeNode

    leaf = TreeNode(tokens=cfg.prefix_tokens, copies=cfg.n_groups, samples=cfg.group_size, output_tokens=1,
                    private_tokens=max(cfg.suffix_tokens - 1, 0))
    return TreeNode(tokens=getattr(cfg, "root_tokens", 0), children=[leaf])


def predict_tree_row(probe: ProbeData, backend: str, cfg: AttentionConfigDoc, hw: HardwareProfile,
                     params_for=None) -> dict[str, float]:
    """The planner's per-layer times of one tree row's configuration: per-sequence over shared pages, over private
    copies, and the cascade."""
    from cascade_plan.calibration.probe_params import params_from_probe
    from cascade_plan.cost.flat_tree import flatten
    from cascade_plan.cost.run_load import tree_costs_at
    from cascade_plan.cost.step_shape import gpu_shape

    model = layer_model(cfg)
    params = (params_for or params_from_probe)(probe, backend, cfg.kv_dtype, hw, model)
    g = gpu_shape(model, hw, cfg.kv_dtype, "bf16", 1)
    flat = flatten(tree_of(cfg))
    shared = tree_costs_at(flat, np.array([1.0]), g, model, "bf16", 1, params)
    dup = tree_costs_at(flat, np.array([1.0]), g, model, "bf16", 1, params, prefix_caching=False)
    return {"per_sequence": float(shared.ps_attention_s[0]), "per_sequence_dup": float(dup.ps_attention_s[0]),
            "cascade": float(shared.cas_attention_s[0])}


def _stats(err: list[float]) -> dict:
    a = np.asarray(err, float)
    if a.size == 0:
        return {"n": 0, "median_ape": None, "max_ape": None, "median_signed": None}
    return {"n": int(a.size), "median_ape": float(np.median(np.abs(a))), "max_ape": float(np.abs(a).max()),
            "median_signed": float(np.median(a))}


def validate_trees(probe: ProbeData, hw: HardwareProfile) -> dict:
    """Per backend and KV dtype ("backend/kv"), per planner kernel: |error| of the planner's tree pricing on the
    probe's tree rows, and every point. Empty where the file has no tree rows."""
    from cascade_plan.calibration.probe_params import params_from_probe

    rows = [m for m in probe.measurements if is_tree(m.config) and m.median_s]
    fitted = probe.fits.kv_dtypes if probe.fits is not None else {}

    @functools.lru_cache(maxsize=None)
    def params(backend: str, kv: str, model):
        return params_from_probe(probe, backend, kv, hw, model)

    @functools.lru_cache(maxsize=None)     # one pricing per configuration gives all three kernels' times
    def predicted(backend: str, cfg: AttentionConfigDoc) -> dict[str, float]:
        return predict_tree_row(probe, backend, cfg, hw, lambda _p, bb, k, _h, m: params(bb, k, m))

    out: dict = {"summary": {}, "points": []}
    for kv, per in fitted.items():
        for backend in per:
            if backend not in ("triton", "flashinfer", "flashinfer-fa2"):
                continue
            src = BACKENDS[backend]
            kernels = {"per_sequence": src["decode"], "per_sequence_dup": src["decode"],
                       "cascade": src.get("total", src["prefix"])}
            errs: dict[str, list[float]] = {k: [] for k in kernels}
            for kernel, (b, variant) in kernels.items():
                name = TREE_KERNELS[kernel]
                for r in rows:
                    if (r.backend, r.kernel, r.config.kv_dtype) != (b, name, kv) or (variant and r.variant != variant):
                        continue
                    pred = predicted(backend, r.config)[kernel]
                    e = pred / r.timed_s - 1
                    errs[kernel].append(e)
                    out["points"].append({"backend": backend, "kv_dtype": kv, "kernel": kernel,
                                          "config": {f: getattr(r.config, f) for f in (
                                              "root_tokens", "prefix_tokens", "group_size", "n_groups",
                                              "suffix_tokens", "q_per_kv", "num_kv_heads", "head_dim")},
                                          "measured_s": r.timed_s, "predicted_s": pred, "error": e})
            if any(errs.values()):
                out["summary"][f"{backend}/{kv}"] = {k: _stats(v) for k, v in errs.items() if v}
    return out
