"""AIConfigurator's per-sequence MLA decode rows (its `mla_generation_module_perf`, DeepSeek-V3's absorbed
MLA in vLLM), shipped in an imported calibration so that the planner interpolates them inside their grid
instead of pricing from the MLA decode fitted to them, as it does with the GQA rows (aic/rows.py).

The table times the whole MLA module of one layer (projections, RoPE, the K/V write and the attention
kernel) for one sequence per request over private pages, at 1-128 query heads per GPU, batch 1-1024 and
context 2-131,072 tokens in powers of two. The projections do not grow with the context, so a row's
attention time is its module time above the smallest context at the same batch and heads, plus the
attention at that smallest context, which the module table cannot separate: there the H200 probe's MLA
decode (FlashInfer's MLA wrapper), transferred (aic/transfer.py), prices it. The stored times are those
attention times.

On disk (`mla_decode_rows`): the axes once, then per KV dtype and query heads per GPU a matrix of times in
microseconds (4 significant digits), one row per batch, one column per context, null where not measured.
Kept: the head counts of DeepSeek-V3 at TP 1-16 (KEEP_HEADS)."""

from __future__ import annotations

import numpy as np

from cascade_plan.calibration.aic.fit import MLA_LATENT, MLA_V_DIM
from cascade_plan.calibration.aic.rows import matrices
from cascade_plan.calibration_schema.kernel_fit import BackendFit
from cascade_plan.cost.ops.attention import MeasuredAttention
from cascade_plan.cost.ops.mla_attention import MLA_BACKEND, mla_shape_key

KEEP_HEADS = (8, 16, 32, 64, 128)
MEASURED_AIC_MLA = "measured (AIConfigurator's MLA rows, interpolated)"


def encode_mla_rows(per_kv: dict[str, tuple[list[dict], np.ndarray]], kernels: dict[str, str],
                    table: str) -> dict | None:
    """The file's `mla_decode_rows` from configurations (aic_fit.mla_decode_configs) and attention times per
    KV dtype, with each dtype's kernel (vLLM picks another MLA kernel for fp8 latents); None when there are
    none."""
    kept = {kv: [(c, t) for c, t in zip(cfgs, times) if c["num_heads"] in KEEP_HEADS] for kv, (cfgs, times)
            in per_kv.items()}
    got = matrices(kept, lambda c: str(c["num_heads"]))
    if got is None:
        return None
    seqs, ctx, out = got
    return {"table": table, "kernels": {kv: kernels.get(kv, "") for kv in out}, "unit": "us",
            "latent_width": MLA_LATENT, "kept_heads": list(KEEP_HEADS),
            "sequences": seqs, "context_tokens": ctx, "kv_dtypes": out}


def _configs(block: dict, kv_dtype: str) -> tuple[list[tuple], list[dict]]:
    per = (block.get("kv_dtypes") or {}).get(kv_dtype) or {}
    seqs, ctx = block["sequences"], block["context_tokens"]
    rows, cfgs = [], []
    for heads, matrix in per.items():
        for i, r in enumerate(matrix):
            for j, v in enumerate(r):
                if v is None:
                    continue
                rows.append((mla_shape_key(int(heads), int(block.get("latent_width", MLA_LATENT))),
                             (float(seqs[i]), 1.0, float(ctx[j]), 0.0), float(v) * 1e-6))
                cfgs.append({"prefix_tokens": int(ctx[j]), "group_size": 1, "n_groups": int(seqs[i]),
                             "suffix_tokens": 0, "num_heads": int(heads), "kv_lora_rank": MLA_V_DIM,
                             "qk_rope_head_dim": MLA_LATENT - MLA_V_DIM, "kv_dtype": kv_dtype})
    return rows, cfgs


def mla_decode_measured(doc: dict, kv_dtype: str, fits: BackendFit, l2_bytes: float) -> MeasuredAttention | None:
    """The rows of one KV dtype as the planner interpolates them: kind "mla", over private pages (kernel
    "per_sequence_dup" at (sequences, 1, context, 0)), each with the fitted MLA decode's time there."""
    from cascade_plan.calibration.mla_fit import predict_mla

    block = doc.get("mla_decode_rows") or {}
    rows, cfgs = _configs(block, kv_dtype) if block else ([], [])
    if not rows:
        return None
    fit = predict_mla(fits, "decode_shared", cfgs, l2_bytes).tolist()
    return MeasuredAttention(MLA_BACKEND, kv_dtype, {"per_sequence_dup": [(*r, f) for r, f in zip(rows, fit)]},
                             label=MEASURED_AIC_MLA, private=True, kind="mla")


def mla_decode_grid(doc: dict, kv_dtype: str) -> dict | None:
    """{context_tokens, sequences, layer_prefix_bytes} of the rows (private pages: no shared prefix)."""
    block = doc.get("mla_decode_rows") or {}
    _, cfgs = _configs(block, kv_dtype) if block else ([], [])
    if not cfgs:
        return None
    return {"context_tokens": int(max(c["prefix_tokens"] for c in cfgs)),
            "sequences": int(max(c["n_groups"] for c in cfgs)), "layer_prefix_bytes": 0.0}
