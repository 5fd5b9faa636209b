"""Stages of benchmarks/decode_vs_flashinfer.py that time a change to the per-sequence decode's kernel body (not its
launch): each gives its configurations and its variants of a base tune, as STAGE_PLANS reads them."""

from __future__ import annotations

import dataclasses

from decode_stage_shapes import default_grid_configs, grid_and_regimes_configs, held_out_first


def l2_hint_variants(base):
    """The current probe, then its K/V loads hinted to L2 (decode_l2_hints): tokens past the shared prefix the
    launch is told evict_first (1), and the shared prefix's evict_last too (2). Over private pages both load every
    token evict_first."""
    r = dataclasses.replace
    return [("default", base), ("private evict_first", r(base, decode_l2_hints=1)),
            ("and shared evict_last", r(base, decode_l2_hints=2))]


def l2_hint_configs():
    """The rows probe 1.20.0 still loses or nearly loses (256 x 8 KV heads at 1K + 4K, G 4, shared, the kernel body;
    head dim 256's 64 groups of 16 x 4 at 512 + 1K; 8 x 8 at 4K + 128, G 5; the private rows at 0.93-0.999), then
    held-out shapes over shared prefixes that no rule was read from, as config.json lays out Llama-3-8B (32 query
    heads, 8 KV heads; three, one fp8), Qwen2.5-7B (28, 4), Mistral-7B (32, 8), Llama-3-70B at TP 4 (16, 2),
    Gemma-2-9B (16, 8; head dim 256), Qwen2.5-1.5B (12, 2), Llama-3.2-1B (32, 8; head dim 64) and Gemma-7B at TP 4
    (4, 4; head dim 256), with the prefix a small or a large share of each sequence's tokens; then the default
    grid's shapes."""
    from kernels_probe.attention.grid import AttentionConfig as C

    losers = [C(1024, 256, 1, 4096, 4, 8, 128), C(512, 16, 64, 1024, 2, 4, 256), C(4096, 8, 1, 128, 5, 8, 128),
              C(4096, 64, 1, 128, 2, 4, 256, "fp8"), C(16384, 128, 1, 128, 16, 2, 128),
              C(4096, 128, 1, 128, 7, 4, 128), C(4096, 128, 1, 128, 12, 4, 128), C(1024, 64, 1, 4096, 4, 8, 128)]
    held_out = [C(2048, 16, 8, 2048, 4, 8, 128), C(1024, 8, 8, 3072, 7, 4, 128), C(512, 64, 8, 1024, 4, 8, 128),
                C(2048, 256, 1, 2048, 4, 8, 128), C(4096, 64, 2, 1024, 8, 2, 128), C(1024, 32, 4, 2048, 2, 8, 256),
                C(1024, 16, 64, 512, 6, 2, 128), C(768, 32, 8, 768, 4, 8, 64), C(2048, 64, 2, 2048, 4, 8, 128, "fp8"),
                C(3072, 32, 1, 1024, 1, 4, 256), C(8192, 32, 1, 256, 4, 8, 128)]
    return held_out_first(losers + held_out, default_grid_configs())


def wide_regs_variants(base):
    """The current probe, then at head dim 256: registers capped at 168 per thread (wide_head_maxnreg; three programs
    of four warps per SM where ptxas takes 224-255 and two fit), the cap with dots over halves of the head dims
    (wide_head_halves: fewer live operand registers, fewer spilled), both on 32-token tiles of 3 stages (two K/V
    buffers in 65 KB: three programs per SM by shared memory too), and that with whole waves of three programs per
    SM (wide_head_wave_ctas)."""
    r = dataclasses.replace
    cap = r(base, wide_head_maxnreg=168)
    halves = r(cap, wide_head_halves=True)
    tiles = r(halves, wide_head_stages=3, wide_head_tile_n=32)
    return [("default", base), ("regs <= 168", cap), ("halves, regs <= 168", halves), ("32/3 halves 168", tiles),
            ("32/3 halves 168 waves of 3", r(tiles, wide_head_wave_ctas=3))]


def wide_regs_configs():
    """Head dim 256's rows probe 1.20.0 loses (64 groups of 16 x 4 KV heads at 512 + 1K, G 2, shared; fp8 64 x 4 at
    4K + 128, private; 8 x 4 at 16K + 128), the held-out Gemma-2-9B-like 4 groups of 32 x 8 at 1K + 2K (0.94 in
    l2-hints.json), then held-out shapes as config.json lays out Gemma-2-9B (16 query heads, 8 KV heads), Gemma-7B
    (16, 16) and at TP 4 (4, 4), Gemma-2-2B (8, 4), Gemma-3-1B (4, 1), Qwen3-Next-80B's full-attention layers (16, 2),
    one fp8; then the coverage and regimes grids' head-dim-256 shapes."""
    from kernels_probe.attention.grid import AttentionConfig as C

    d = 256
    first = [C(512, 16, 64, 1024, 2, 4, d), C(4096, 64, 1, 128, 2, 4, d, "fp8"), C(16384, 8, 1, 128, 2, 4, d),
             C(1024, 32, 4, 2048, 2, 8, d)]
    held_out = [C(2048, 6, 1, 128, 1, 4, d), C(2048, 4, 1, 128, 1, 8, d), C(3072, 32, 1, 1024, 1, 4, d),
                C(1536, 16, 8, 512, 2, 8, d), C(4096, 24, 1, 256, 2, 4, d, "fp8"), C(8192, 4, 1, 128, 4, 1, d),
                C(1024, 64, 4, 768, 8, 2, d), C(2048, 128, 1, 128, 1, 16, d)]
    return held_out_first(first + held_out, [c for c in grid_and_regimes_configs() if c.head_dim == d])


def lanes_variants(base):
    """The current probe, then in lanes (decode_lanes: each warp its own slice of every tile, one softmax state per
    warp, merged once per token range) wherever a slice holds 16 or more keys."""
    return [("default", base), ("lanes", dataclasses.replace(base, decode_lanes=True))]


def kernel_body_configs():
    """The shapes of the lanes and unsigned-pages stages: l2_hint_configs' rows (those probe 1.20.0 loses or nearly
    loses, the held-out shapes over shared prefixes, the default grid's), then the head-dim-256 rows wide_regs_configs
    lists first and its held-out ones."""
    first = l2_hint_configs()
    return held_out_first(first, [c for c in wide_regs_configs() if c not in first])


def unsigned_page_variants(base):
    """Probe 1.20.0 (the base STAGE_PLANS gives), then with its page arithmetic unsigned (decode_unsigned_pages:
    fewer instructions a tile, the same kernel otherwise), as probe 1.21.0 runs it."""
    return [("default", base), ("unsigned pages", dataclasses.replace(base, decode_unsigned_pages=True))]


def stagger_variants(base):
    """The current probe, then the next tile's K and V loaded into registers (decode_stagger, one stage) on tiles of at
    most 64 of K's elements a thread (stagger_thread_elements: head dim 128 on four warps 64 tokens, 256 32) and of
    at most 32 (32 and 16 tokens: three programs of four warps per SM by registers where 64 fit two)."""
    r = dataclasses.replace
    return [("default", base), ("stagger 64/thread", r(base, decode_stagger=True)),
            ("stagger 32/thread", r(base, decode_stagger=True, stagger_thread_elements=32))]


def stagger_configs():
    """The four rows probe 1.22.0 still loses (256 x 8 KV heads at 1K + 4K, G 4, shared; head dim 256's 64 groups of
    16 x 4 at 512 + 1K, shared, and fp8 64 x 4 at 4K + 128, private; 64 groups of 16 x 2 at 512 + 1K, G 6, shared),
    then kernel_body_configs' shapes."""
    from kernels_probe.attention.grid import AttentionConfig as C

    lost = [C(1024, 256, 1, 4096, 4, 8, 128), C(512, 16, 64, 1024, 2, 4, 256), C(4096, 64, 1, 128, 2, 4, 256, "fp8"),
            C(512, 16, 64, 1024, 6, 2, 128)]
    return held_out_first(lost, kernel_body_configs())



def gluon_variants(base):
    """The current probe, then its unsplit launches without page blocks over bf16 at head dims 64 and 128 on the
    Gluon decode (decode_gluon: K and V waited for apart, each warp its own keys, 128-token tiles of four warps),
    one program per (sequence, KV head), then persistent at two programs an SM (decode_gluon_persist), then that and
    head dim 256's launches of at most 8 query heads per KV head on transposed dots too (decode_gluon_wide)."""
    on = dataclasses.replace(base, decode_gluon=True)
    persist = dataclasses.replace(on, decode_gluon_persist=2)
    return [("default", base), ("gluon", on), ("gluon persist 2", persist),
            ("gluon wide persist 2", dataclasses.replace(persist, decode_gluon_wide=True))]
