"""The stages of benchmarks/decode_vs_flashinfer.py for head dim 256's streaming launch at one program per SM (probe
1.22.0): their shapes (held-out ones first: models as their config.json lays out heads, no rule read off them) and
their variants of a base tune. Kept apart from decode_vs_flashinfer.py, which registers them in STAGE_PLANS."""

from __future__ import annotations

import dataclasses

from decode_rule_stages import then_grids


def wide_head_stream_variants(base):
    """The current probe and head dim 256's streaming launch at one program per SM on tiles that load their page
    numbers an iteration ahead (wide_head_stream_programs_per_sm), of 32 tokens in 3 stages and of 64 in 3: the
    oracle (device-2026-12-07j) found 8 x 4 KV heads at 16K + 128 over private pages 1.03x FlashInfer's decode in 4
    splits on the 32-token tile and 1.02x on the 64-token one, where probe 1.21.0's 8 on the base tile ran 0.99x."""
    r = dataclasses.replace
    return [("default", base), ("stream 1/SM, 32/3 ahead", r(base, wide_head_stream_programs_per_sm=1)),
            ("stream 1/SM, 64/3 ahead", r(base, wide_head_stream_programs_per_sm=1, wide_head_stream_tile_n=64))]


def probe_1_22_variants(base):
    """The current probe (1.22.0: wide_head_stream_programs_per_sm on) against probe 1.21.0, whose tune lacks it."""
    from cascade_plan.own_kernel_tunes import PROBE_1_21_0_TUNE

    return [("default", base), ("probe 1.21.0", PROBE_1_21_0_TUNE)]


def wide_head_stream_configs():
    """Held-out head-dim-256 shapes whose streaming launch the rule changes (1-64 sequences over 8K-128K tokens), as
    config.json lays out Gemma-2-9B (16 query heads, 8 KV heads; four, one over a shared 2K prompt), Gemma-3-12B
    (16, 8; fp8), Gemma-2-2B (8, 4; three, one over a shared 4K prompt), Gemma-7B (16, 16; two, one fp8),
    Qwen3-Next-80B's full-attention layers (16, 2; two), Gemma-3-4B (8, 4; fp8) and Gemma-3-1B (4, 1); then the
    grids' shapes (with --only-changed, those it launches otherwise)."""
    from kernels_probe.attention.grid import AttentionConfig as C

    d, f8 = 256, (256, "fp8")
    held_out = [C(32768, 4, 1, 256, 2, 8, d), C(8192, 16, 1, 512, 2, 8, d), C(65536, 2, 1, 128, 2, 8, d),
                C(16384, 8, 1, 256, 2, 8, *f8), C(8192, 32, 1, 128, 2, 4, d), C(32768, 4, 1, 1024, 2, 4, d),
                C(8192, 8, 1, 256, 1, 16, d), C(16384, 2, 1, 128, 1, 16, *f8), C(32768, 16, 1, 512, 8, 2, d),
                C(8192, 64, 1, 128, 8, 2, d), C(16384, 16, 1, 256, 2, 4, *f8), C(16384, 64, 1, 128, 4, 1, d),
                C(2048, 8, 1, 8192, 2, 8, d), C(4096, 4, 1, 16384, 2, 4, d), C(131072, 1, 1, 128, 2, 8, d)]
    return then_grids(held_out)
