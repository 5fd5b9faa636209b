"""How the attention kernels tile their work, and what a partly filled tile costs: the cascade prefix pass's
query rows, the per-sequence decode's query heads, and the KV tokens a decode reads in whole tiles.

Where one more token costs a tile, not a token: FlashInfer's tensor-core decode (its FA2 paged kernel with a packed
query tile of 16 rows) walks each (sequence, KV head) row's context in whole KV tiles whose length its launcher
picks from the GPU's shared memory: two blocks per SM where they fit, K and V slices of 16 tokens for each of four
KV warps per unit, at most 8 units, rounded down to a power of two. On Hopper that is 128 tokens at head dim 128
with 16-bit KV and 256 with fp8 KV. A decode over a tile-aligned prompt and one new token therefore reads a whole
extra tile: at a 512-token prefix the probe's 16-token suffix row costs 10-24% over its no-suffix row in bf16
(H200), and fp8 decode on an H100 takes 152 us at 512 tokens, 194-200 us at 528-768 and 242 us at 784
(docs/probe-notes.md). Pure numpy."""

from __future__ import annotations

import numpy as np

# The cascade prefix pass tiles one prompt's query rows per KV head (its sequences x query heads per KV
# head) in blocks of at most this many rows, on every backend the probe times: the probe's Triton kernel
# (BLOCK_M: the smallest power of two >= the rows, at most 128) and FlashInfer's prefill (CTA_TILE_Q 128
# at head dim 128 once the packed rows exceed 64).
PREFIX_TILE_ROWS = 128


def prefix_tile_rows(rows):
    """Query rows the prefix pass computes for `rows` (one prompt's sequences x query heads per KV head):
    the rows themselves while they fit one tile (the kernels size a single tile to them), else whole tiles
    (the last one partly empty, computed in full: 320 rows of a 64-sequence Qwen2.5 prompt run as 384)."""
    r = np.asarray(rows, float)
    return np.where(r > PREFIX_TILE_ROWS, np.ceil(r / PREFIX_TILE_ROWS - 1e-9) * PREFIX_TILE_ROWS, r)


def prefix_tile_factor(rows):
    """prefix_tile_rows / rows (1 where there are no rows): the prefix pass's computed FLOP per useful FLOP."""
    r = np.asarray(rows, float)
    return np.where(r > 0, prefix_tile_rows(r) / np.maximum(r, 1e-300), 1.0)


# How a backend's cascade prefix pass lays out one prompt's query rows: "kv_head" packs a prompt's sequences x
# the query heads of each KV head into one tile (the probe's Triton kernel, FlashInfer's FA2 prefill);
# "q_head" gives each query head its own whole 128-row tiles of the prompt's sequences (FlashInfer's FA3
# prefill on Hopper, its automatic choice there: on the H200 its prefix time for 32 prompts x 4 KV heads x 8
# query heads is the same at 8, 16 and 32 sequences per prompt, 261-288 us at 2,048 tokens, 1,024 tiles x 128
# rows at 540 TFLOP/s).
PREFIX_ROWS = ("kv_head", "q_head")


def prefix_compute_factor(readers, q_per_kv, prefix_rows: str = "kv_head"):
    """Computed FLOP per useful FLOP of the prefix pass: `readers` sequences per prompt, `q_per_kv` query
    heads per KV head, tiled as `prefix_rows` says (PREFIX_ROWS)."""
    r = np.asarray(readers, float)
    if prefix_rows == "q_head":
        return np.where(r > 0, np.ceil(r / PREFIX_TILE_ROWS - 1e-9) * PREFIX_TILE_ROWS / np.maximum(r, 1e-300), 1.0)
    return prefix_tile_factor(r * np.asarray(q_per_kv, float))


# How a backend's per-sequence decode computes a KV head's query heads: "q_head", as useful FLOP (each query
# head's row on its own); "kv_head", the G query heads of a KV head as the rows of one tensor-core dot, padded to
# at least 16 (the probe's Triton kernel: BLOCK_G = max(16, next power of two of G)), so its work follows the
# KV heads, not the query heads. On the H200 its fp8 decode costs 0.13 ns per KV-head token at 4, 5, 7 and 8
# query heads per KV head alike once the GPU is full.
DECODE_ROWS = ("q_head", "kv_head")
DECODE_MIN_ROWS = 16


def decode_compute_factor(q_per_kv, decode_rows: str = "q_head"):
    """Computed FLOP per useful FLOP of a per-sequence decode kernel (DECODE_ROWS)."""
    g = np.asarray(q_per_kv, float)
    if decode_rows == "kv_head":
        return np.maximum(DECODE_MIN_ROWS, 2.0 ** np.ceil(np.log2(np.maximum(g, 1.0)) - 1e-9)) / np.maximum(g, 1.0)
    return np.ones_like(g)


# Shared memory per SM and the most one block may opt into, bytes, by compute capability (CUDA programming guide).
SHARED_MEMORY_BYTES: dict[str, tuple[int, int]] = {
    "8.0": (167936, 166912), "8.7": (167936, 166912),
    "8.6": (102400, 101376), "8.9": (102400, 101376),
    "9.0": (233472, 232448), "10.0": (233472, 232448),
}
QUERY_TILE_ROWS = 16
KV_WARPS = 4
TOKENS_PER_WARP_SLICE = 16
MAX_UNITS = 8


def fa2_decode_tile_tokens(head_dim: int, kv_bytes: int, compute_capability: str, q_bytes: int = 2) -> int:
    """KV tokens per tile of FlashInfer's FA2 paged decode at a 16-row query tile on a GPU of that compute
    capability; 0 where its shared memory is not known here (no tile rule: tokens priced one by one)."""
    smem = SHARED_MEMORY_BYTES.get(compute_capability)
    if smem is None or head_dim <= 0 or kv_bytes <= 0:
        return 0
    per_sm, per_block = smem
    unit = 2 * head_dim * TOKENS_PER_WARP_SLICE * KV_WARPS * kv_bytes      # K and V slices of every KV warp
    fixed = QUERY_TILE_ROWS * head_dim * q_bytes                            # the query tile
    blocks = 2 if per_sm >= 2 * (fixed + unit) else 1
    budget = min(per_sm // blocks, per_block)
    units = min(max((budget - fixed) // unit, 1), MAX_UNITS)
    units = 1 << (int(units).bit_length() - 1)                              # down to a power of two
    return units * TOKENS_PER_WARP_SLICE * KV_WARPS


def tiled_suffix(prefix_tokens, suffix_tokens, tile_tokens: int, partial_share: float = 1.0) -> np.ndarray:
    """The suffix a decode over `prefix_tokens + suffix_tokens` is priced at where it reads whole tiles of
    `tile_tokens`: its tokens plus `partial_share` of the empty part of its last tile (1: the whole tile, as the
    kernel computes it; 0: its tokens alone, as it loads them); 0 stays 0 (no private token, no extra tile). Equal to
    the suffix where `tile_tokens` is 0 or the context already ends on a tile."""
    s = np.asarray(suffix_tokens, float)
    if tile_tokens <= 0:
        return s
    p = np.asarray(prefix_tokens, float)
    whole = np.maximum(np.ceil((p + s) / tile_tokens - 1e-9) * tile_tokens - p, s)
    return np.where(s > 0, s + partial_share * (whole - s), s)


def partial_tile_shares(points: np.ndarray, time_s: np.ndarray, tile_tokens: int) -> list[float]:
    """What a partly filled tile costs, from one shape's rows (points (N, 4) over n_groups, group_size,
    prefix_tokens, suffix_tokens): for each (n_groups, group_size, prefix) with a tile-aligned prefix and rows at no
    suffix, at a suffix shorter than a tile, and at a longer one that ends on a tile, the share of the short
    suffix's tile's empty part its time shows beyond its own tokens, at the per-token slope of the longer row."""
    out: list[float] = []
    if tile_tokens <= 0:
        return out
    keys = {tuple(p[:3]) for p in points}
    for g, n, prefix in keys:
        if prefix % tile_tokens:
            continue
        at = {float(p[3]): float(t) for p, t in zip(points, time_s) if tuple(p[:3]) == (g, n, prefix)}
        short = [x for x in at if 0 < x < tile_tokens]
        longer = [x for x in at if x >= tile_tokens and (prefix + x) % tile_tokens == 0]
        if 0.0 not in at or not short or not longer:
            continue
        s, s1 = min(short), max(longer)
        slope = (at[s1] - at[0.0]) / s1
        if slope > 0:
            out.append(((at[s] - at[0.0]) / slope - s) / (tile_tokens - s))
    return out
