"""AIConfigurator's MoE layer rows (`moe_perf`) for the shipped MoE models' expert shapes, kept in an imported
calibration as tables over tokens per step (cost/moe_table.py), so that the planner prices the routed experts
from them inside their token range, as it prices the probe's grouped-GEMM rows.

A `moe_perf` row times one MoE layer's experts as the framework runs them (vLLM's fused MoE: the kernel named
in `kernel_source`, gate_up, activation and down of every expert the batch touches, top-k weighting
included) for `num_tokens` tokens at one expert shape (hidden, the model's full expert width `inter_size`,
top-k, experts), tensor-parallel split of the experts (`moe_tp_size`, each GPU 1/tp of every expert's width:
the planner's layout, so expert parallelism 1) and routing (`balanced`; `power_law_1.01` and `power_law_1.2`
skewed: not kept, see ROUTINGS). Kept: the shapes of the model presets with routed experts at TP 1, 2, 4 and
8, each planner weight dtype, balanced routing, the most common kernel of each; one median per token count.
fp8 is AIConfigurator's block-scaled fp8 (`fp8_block`: what DeepSeek-V3 ships; vLLM's Triton fused MoE on
Hopper and the L40S, FlashInfer's TRT-LLM MoE on Blackwell), its per-tensor `fp8` only where that is missing:
on the H200 those rows (ModelOpt's FlashInfer CUTLASS MoE, Mixtral's shape) read 2.5-4x slower than its bf16
rows at 4-256 tokens and fall and rise again with the token count (2.2 ms at 256, 0.96 ms at 512, 3.1 ms at
768), which no fp8 expert GEMM does."""

from __future__ import annotations

import numpy as np

from cascade_plan.calibration.aic.fit import MS, most_common

# planner weight dtype -> AIConfigurator's moe_dtype, in order of preference
AIC_MOE_DTYPES = {"bf16": ("bfloat16",), "fp8": ("fp8_block", "fp8")}
TPS = (1, 2, 4, 8)
# Balanced only. The table's power-law routings are another skew than the probe's: every expert still gets
# tokens, unevenly, so the most loaded one sets the time (on the H200, DeepSeek-V3's experts at TP 8 take
# 1.3-1.5x longer than balanced at 64-1024 tokens), where the probe's Zipf-skewed router concentrates tokens
# on few experts and so reads fewer experts' weights (0.34-0.54x of balanced at 8-256 tokens).
ROUTINGS = ("balanced",)


def _moe_models():
    from cascade_plan.inputs.model_presets import PRESETS
    from cascade_plan.inputs.model_spec import load_model

    out = []
    for mid in sorted(PRESETS):
        m = load_model(mid)
        if m.num_moe_layers and m.num_experts:
            out.append(m)
    return out


def moe_rows(cols: dict) -> list[dict]:
    """The file's `moe_rows`: one entry per (model shape, TP, weight dtype, routing) the table measured."""
    out: list[dict] = []
    seen = set()
    base = (cols["moe_ep_size"] == 1) & (cols["latency"] > 0)
    for model in _moe_models():
        shape = (model.hidden_size, model.moe_intermediate_size, model.experts_per_token, model.num_experts)
        if shape in seen:
            continue
        seen.add(shape)
        sel_shape = (base & (cols["hidden_size"] == shape[0]) & (cols["inter_size"] == shape[1])
                     & (cols["topk"] == shape[2]) & (cols["num_experts"] == shape[3]))
        for tp in TPS:
            if model.moe_intermediate_size % tp:
                continue
            at_tp = sel_shape & (cols["moe_tp_size"] == tp)
            for dtype, aic_dtypes in AIC_MOE_DTYPES.items():
                aic = next((a for a in aic_dtypes if (at_tp & (cols["moe_dtype"] == a)).any()), None)
                if aic is None:
                    continue
                with_dtype = at_tp & (cols["moe_dtype"] == aic)
                for routing in ROUTINGS:
                    sel = with_dtype & (cols["distribution"] == routing)
                    if not sel.any():
                        continue
                    kernel = most_common(cols["kernel_source"][sel])
                    sel &= cols["kernel_source"] == kernel
                    tok, t = cols["num_tokens"][sel].astype(int), cols["latency"][sel] * MS
                    m = np.unique(tok)
                    if m.size < 2:
                        continue
                    out.append({"hidden": shape[0], "intermediate": shape[1] // tp, "experts": shape[3],
                                "top_k": shape[2], "tp": tp, "dtype": dtype, "aic_dtype": aic, "routing": routing,
                                "kernel": kernel, "m": [int(x) for x in m],
                                "seconds": [float(f"{np.median(t[tok == x]):.4g}") for x in m]})
    return out
