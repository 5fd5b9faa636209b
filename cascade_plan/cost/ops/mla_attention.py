"""MLA attention (DeepSeek's absorbed form) as an operation: what the planner prices with the probe's MLA fits
and rows instead of the GQA kernels. A GPU holds the whole latent (one "KV head" of kv_lora_rank + rope dims per
token, replicated on every tensor-parallel rank) and its share of the query heads; a table of measured MLA rows
is keyed by (query heads per GPU, 1, latent width), in the GQA tables' (q_per_kv, KV heads, head dim) slots.

The step's MLA terms are the GQA terms of cost/cost_model.py with an MLA GpuShape (one row per sequence, every
query head of the GPU on it, 2 x (576 + 512) FLOP per query head and token) and the MLA kernel fits:
per-sequence decode over shared pages (`decode_mla`, with its own L2 gain), the cascade's prefix pass
(`prefix_mla`) and its suffix pass with the merge folded in (`suffix_mla`), run one after the other.
Pure numpy; nothing here reads a file."""

from __future__ import annotations

MLA_BACKEND = "flashinfer"        # the one MLA kernel family the probe times (BatchMLAPagedAttentionWrapper)
MLA = "mla"                       # MeasuredAttention.kind of MLA rows


def mla_shape_key(q_heads_per_gpu: int, latent_width: int) -> tuple[int, int, int]:
    return (int(q_heads_per_gpu), 1, int(latent_width))


def model_shape_key(model, q_heads_per_gpu: int) -> tuple[int, int, int]:
    return mla_shape_key(q_heads_per_gpu, model.kv_lora_rank + model.qk_rope_head_dim)


def shape_words(shape: tuple[int, int, int]) -> str:
    h, _, w = shape
    return f"MLA, {h} query head{'s' if h != 1 else ''} per GPU over one {w}-wide latent"


# FlashInfer's FA MLA kernels tile one request's query rows (its query tokens x the GPU's query heads) in
# blocks of 64 rows, or 128 (a cluster of two) once a request has more than 64; a partly filled tile
# computes in full. At 16 query heads per GPU (DeepSeek-V3 at TP 8) a decoding sequence fills a quarter of
# its tile: the per-sequence decode and the suffix pass compute 4x their useful FLOP (the H200 rows show it:
# 16-head decode at large batch runs at the padded tiles' ~670 TFLOP/s, 170 useful).
MLA_TILE_ROWS = 64


def mla_tile_factor(rows):
    """Computed / useful query rows of one request of `rows` rows (tokens x query heads)."""
    import numpy as np

    r = np.maximum(np.asarray(rows, float), 1e-300)
    tile = np.where(r > MLA_TILE_ROWS, 2 * MLA_TILE_ROWS, MLA_TILE_ROWS)
    return np.ceil(r / tile - 1e-9) * tile / r
