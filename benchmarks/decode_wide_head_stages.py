"""Stages of benchmarks/decode_vs_flashinfer.py that timed the per-sequence decode's rules at wide head dims (head
dim 256: its split targets, tiles and waves, probes 1.10-1.15) and the regimes grid's lost rows of probe 1.11.0:
each gives its configurations and its variants of a base tune, as STAGE_PLANS reads them."""

from __future__ import annotations

import dataclasses

from decode_stage_shapes import grid_and_regimes_configs, held_out_first, regimes_configs, shape_key


def head_dim_256_variants(base):
    """The default, and launches whose tiles fit more than one program per SM at head dim 256 (where the
    double-buffered base tile takes 138 KB of shared memory and the 128-token tiles 140 KB:
    `python -m kernels_probe.attention.pipelining`): 64-token batch-filled and long-context tiles, a base tile that
    never prefetches (one K/V buffer, 74 KB), both, and 32-token base tiles. Every tune here applies at every head
    dim; the stage times only head-dim-256 shapes (head_dim_256_configs)."""
    r = dataclasses.replace
    no_pf = {"prefetch_max_programs_per_sm": 0, "prefetch_min_tokens": 1 << 30}
    return [("default", base), ("64-token filled/long tiles", r(base, decode_block_n_large_batch=64, long_block_n=64)),
            ("base tile single-buffered", r(base, **no_pf)),
            ("both", r(base, decode_block_n_large_batch=64, long_block_n=64, **no_pf)),
            ("32-token base tile", r(base, decode_block_n=32))]


def head_dim_256_configs():
    """The regimes grid's head-dim-256 shapes (2 query heads per KV head, 4 KV heads), where our decode read
    0.77-0.99x FlashInfer's on an H100 (benchmarks/raw/device-2026-12-06g/regimes-decode.json)."""
    return [c for c in regimes_configs() if c.head_dim == 256]


def wide_head_variants(base):
    """Probe 1.10.0's launch (head dim 256 on head dim 128's tiles), the default (wide_head_min_dim: 64-token
    batch-filled and long-context tiles, a base tile that never prefetches) and the default with 32-token base tiles,
    which took the regimes grid's 8 sequences at 4K + 128 from 0.76x FlashInfer's decode to 1.10x over shared pages
    but 64 sequences at 4K (fp8, private pages) from 0.86x to 0.82x (benchmarks/raw/device-2026-12-06h/
    head-dim-256.json)."""
    from cascade_plan.own_kernel_tunes import PROBE_1_10_0_TUNE

    return [("probe 1.10.0", PROBE_1_10_0_TUNE), ("default", base),
            ("32-token base tile", dataclasses.replace(base, decode_block_n=32))]


def wide_head_configs():
    """The regimes grid's head-dim-256 shapes, then held-out ones no rule was read from, as models with head dim 256
    lay out their heads: 8 KV heads x 2 query heads (a Gemma-3-12B-like layer), 2 x 8 (the full-attention layers of
    a Qwen3-Next-like model), 1 x 4 (a Gemma-3-1B-like one) and 4 x 2 at other batches and contexts."""
    from kernels_probe.attention.grid import AttentionConfig as C

    held_out = [C(2048, 64, 1, 256, 2, 8, 256), C(8192, 16, 1, 512, 2, 8, 256), C(32768, 4, 1, 128, 2, 8, 256),
                C(1024, 8, 32, 512, 2, 8, 256), C(512, 1, 1, 8192, 2, 8, 256),
                C(4096, 32, 1, 1024, 8, 2, 256), C(16384, 8, 1, 128, 8, 2, 256), C(1024, 16, 16, 256, 8, 2, 256),
                C(65536, 1, 1, 128, 8, 2, 256), C(8192, 32, 1, 2048, 2, 4, 256, "fp8"),
                C(2048, 256, 1, 128, 2, 4, 256), C(1024, 16, 64, 256, 4, 1, 256), C(4096, 16, 8, 512, 4, 1, 256),
                C(2048, 16, 1, 128, 2, 4, 256), C(16384, 32, 1, 256, 2, 8, 256, "fp8")]
    return head_dim_256_configs() + held_out


def wide_head_wave_variants(base):
    """The default and split targets of 2 programs per SM for the base tile (and 4 for the long-context launch): at
    head dim 256 every decode tile takes 226-255 registers per thread at four warps, so two programs fit an SM, not
    the four the base target fills (`python -m kernels_probe.attention.pipelining`, Triton 3.9 for sm_90); 8
    sequences x 4 KV heads at 4K + 128 then runs 352 programs in two waves of at most 264."""
    r = dataclasses.replace
    return [("default", base), ("2 per SM", r(base, wide_head_programs_per_sm=2)),
            ("2 per SM, long 4", r(base, wide_head_programs_per_sm=2, long_programs_per_sm=4))]


def wide_head_wave_configs():
    """wide_head_configs' shapes (with --only-changed, the 19 whose launch a target of 2 per SM changes: every one
    of fewer than 4 x 132 (sequence, KV head) items that splits)."""
    return wide_head_configs()


def regimes_loser_variants(base):
    """The default and launch changes aimed at the classes of rows probe 1.11.0 still lost on an H100
    (benchmarks/raw/device-2026-12-06h: regimes-decode.json, wide-head.log), each applied at every shape: split
    targets of 2 programs per SM (head dim 256: 226-255 registers per thread, two programs fit an SM), half the
    long-context target (fewer splits, a smaller merge), the streaming launch at 4 programs per SM and none at all
    (fp8 over 128K-256K private tokens), base tiles on four warps (fp8's conversions over more threads) and no blocks
    for 9-16 query heads per KV head (12 query heads at 16K over shared pages); and probe 1.11.0's launch, which
    differs from the default's only for one sequence's prefix (sibling_shared_only)."""
    from cascade_plan.own_kernel_tunes import PROBE_1_11_0_TUNE

    r = dataclasses.replace
    return [("default", base), ("probe 1.11.0", PROBE_1_11_0_TUNE), ("2 per SM", r(base, target_programs_per_sm=2)),
            ("2 per SM, long 4", r(base, target_programs_per_sm=2, long_programs_per_sm=4)),
            ("long 4", r(base, long_programs_per_sm=4)),
            ("stream 4", r(base, stream_programs_per_sm=4, stream_max_programs_per_sm=4)),
            ("no stream", r(base, stream_programs_per_sm=0)),
            ("4-warp base", r(base, decode_warps=4)),
            ("no wide dot", r(base, wide_dot_block_n=0))]


# (prefix, group size, groups, suffix, query heads per KV head, KV heads, head dim, KV dtype) of the rows probe
# 1.11.0 lost on an H100: the regimes grid's (regimes-decode.json) and wide-head's held-out ones (wide-head.log)
LOSER_SHAPES_1_11 = {
    (4096, 8, 1, 128, 2, 4, 256, "bf16"), (16384, 8, 1, 128, 12, 4, 128, "bf16"),
    (4096, 16, 1, 8192, 4, 8, 128, "fp8"), (262144, 8, 1, 128, 4, 8, 128, "fp8"),
    (4096, 64, 1, 128, 2, 4, 256, "fp8"), (131072, 8, 1, 128, 4, 8, 128, "fp8"),
    (512, 16, 64, 1024, 2, 4, 256, "bf16"), (1024, 8, 1, 128, 2, 4, 256, "bf16"),
    (512, 16, 64, 1024, 6, 2, 128, "bf16"), (1024, 128, 1, 128, 2, 4, 256, "bf16"),
    (4096, 128, 1, 128, 12, 4, 128, "bf16"),
    (4096, 32, 1, 1024, 8, 2, 256, "bf16"), (1024, 16, 16, 256, 8, 2, 256, "bf16"),
    (65536, 1, 1, 128, 8, 2, 256, "bf16"), (2048, 16, 1, 128, 2, 4, 256, "bf16"),
    (8192, 32, 1, 2048, 2, 4, 256, "fp8")}


def regimes_loser_configs():
    """The rows of LOSER_SHAPES_1_11, from the regimes grid and wide-head's shapes, after the three of the coverage
    and regimes grids whose launch sibling_shared_only changes (one sequence at 64K-256K)."""
    seen, out = set(), []
    for c in grid_and_regimes_configs():
        if c.group_size == 1 and c.n_groups == 1 and c.prefix_tokens >= 65536 and c.num_kv_heads == 8:
            out.append(c)
    for c in regimes_configs() + wide_head_configs():
        key = shape_key(c)
        if key in LOSER_SHAPES_1_11 and key not in seen and not c.root_tokens:
            seen.add(key)
            out.append(c)
    return out


def wide_head_private_variants(base):
    """The default and a split target of 2 programs per SM at head dim 256 over pages known to be private only
    (wide_head_private_programs_per_sm): 2 per SM everywhere won 10 of 11 private-pages rows on an H100 (1.00-1.17x;
    one 0.90x) and lost shared ones it left unsplit, their blocks gone (0.46-0.86x; device-2026-12-06j)."""
    return [("default", base), ("private 2/SM", dataclasses.replace(base, wide_head_private_programs_per_sm=2))]


def wide_head_private_configs():
    """Held-out head-dim-256 shapes first (Gemma-2-9B-like 2 x 8 KV heads, Gemma-3-4B-like 2 x 4, Gemma-3-1B-like
    4 x 1, Qwen3-Next-like 8 x 2, fp8 2 x 4), then wide_head_configs' (with --only-changed, those whose private-pages
    decode or cascade suffix pass the target changes)."""
    from kernels_probe.attention.grid import AttentionConfig as C

    held_out = [C(8192, 8, 1, 128, 2, 8, 256), C(2048, 32, 1, 512, 2, 8, 256), C(16384, 4, 1, 256, 2, 4, 256),
                C(4096, 16, 1, 128, 2, 4, 256), C(32768, 8, 1, 128, 4, 1, 256), C(8192, 32, 1, 128, 8, 2, 256),
                C(4096, 32, 1, 128, 2, 4, 256, "fp8")]
    return held_out_first(held_out, wide_head_configs())


def wide_head_tile_variants(base):
    """Probe 1.14.0 and head dim 256 on double-buffered tiles (wide_head_stages): compiled for sm_90 (python -m
    kernels_probe.attention.pipelining, Triton 3.9) every head-dim-256 tile probe 1.14.0 launches holds one K/V
    buffer (the 64-token 2-stage tiles in 74 KB; the base tile waits on its own page numbers), while 32-token tiles of
    3 stages hold two in 73 KB at 224 registers and 16-token ones of 4 stages three in 57 KB at 168; the 32-token ones
    also with the base split target of 2 per SM that their registers allow."""
    r = dataclasses.replace
    return [("default", base), ("32-token tiles, 3 stages", r(base, wide_head_stages=3, wide_head_tile_n=32)),
            ("16-token tiles, 4 stages", r(base, wide_head_stages=4, wide_head_tile_n=16)),
            ("32-token tiles, 3 stages, 2/SM", r(base, wide_head_stages=3, wide_head_tile_n=32,
                                                  wide_head_programs_per_sm=2))]


def wide_head_tile_configs():
    """The regimes grid's head-dim-256 shapes (where probe 1.14.0 still ran 0.92-0.99x FlashInfer's decode on five
    rows: device-2026-12-06l, regimes-next.json), then held-out ones no rule was read from, as config.json lays out
    models of head dim 256: Gemma-2-9B (8 KV heads x 2), Gemma-3-12B at TP 2 (4 x 2), Gemma-7B at TP 2 (8 x 1),
    Qwen3-Next-80B's full-attention layers (2 x 8), Gemma-3-1B (1 x 4), Gemma-3-4B over fp8 (4 x 2), Gemma-2-9B at
    512 sequences and Gemma-2-2B over fp8 (4 x 2)."""
    from kernels_probe.attention.grid import AttentionConfig as C

    held_out = [C(6144, 24, 1, 256, 2, 8, 256), C(12288, 12, 1, 384, 2, 4, 256), C(3072, 48, 1, 192, 1, 8, 256),
                C(24576, 6, 1, 320, 8, 2, 256), C(2048, 96, 1, 640, 4, 1, 256),
                C(8192, 20, 1, 160, 2, 4, 256, "fp8"), C(768, 64, 8, 256, 2, 8, 256),
                C(1536, 32, 4, 512, 2, 4, 256, "fp8")]
    return head_dim_256_configs() + held_out


def wide_head_short_variants(base):
    """Probe 1.14.0, head dim 256's 32-token 3-stage tiles only where wide-head-tiles found them paying (a base-tile
    launch over private pages and a bf16 cache whose splits hold at most 512 tokens: wide_head_stages_max_tokens),
    and the same over splits of any length (base tiles still; 0.98-1.00x there in wide-head-tiles)."""
    r = dataclasses.replace
    capped = r(base, wide_head_stages=3, wide_head_tile_n=32, wide_head_stages_max_tokens=512)
    return [("default", base), ("32-token tiles, private splits <= 512", capped),
            ("32-token tiles, private base tiles", r(capped, wide_head_stages_max_tokens=1 << 20))]


def wide_head_short_configs():
    """Held-out head-dim-256 shapes no rule was read from, few sequences over 1.5K-20K tokens, as config.json lays out
    Gemma-2-9B (8 KV heads x 2), Gemma-3-4B and Gemma-2-2B (4 x 2), Gemma-3-1B (1 x 4), Qwen3-Next-80B's
    full-attention layers (2 x 8), Gemma-7B at TP 2 (8 x 1) and Gemma-3-12B at TP 2 (4 x 2); then wide-head-tiles'
    shapes (with --only-changed, those a variant launches otherwise)."""
    from kernels_probe.attention.grid import AttentionConfig as C

    held_out = [C(8960, 2, 1, 256, 2, 8, 256), C(2816, 6, 1, 256, 2, 8, 256), C(2944, 16, 1, 128, 2, 4, 256),
                C(8704, 6, 1, 512, 2, 4, 256), C(12032, 12, 1, 256, 4, 1, 256), C(4096, 48, 1, 512, 4, 1, 256),
                C(11904, 8, 1, 384, 8, 2, 256), C(2560, 32, 1, 512, 8, 2, 256), C(2048, 12, 1, 256, 1, 8, 256),
                C(5888, 4, 1, 256, 1, 8, 256), C(2176, 32, 1, 128, 2, 4, 256), C(20224, 2, 1, 256, 2, 4, 256),
                C(1280, 48, 1, 256, 2, 4, 256)]
    return held_out_first(held_out, wide_head_tile_configs())
