"""Stages of benchmarks/decode_vs_flashinfer.py for the launch rules after probe 1.14.0: each a function of its
shapes (held-out ones first: models as their config.json lays out heads, no rule read off them) and one of its
variants of a base tune. Kept apart from decode_vs_flashinfer.py, which registers them in STAGE_PLANS."""

from __future__ import annotations

import dataclasses

from decode_stage_shapes import grid_and_regimes_configs, held_out_first
from decode_wide_head_stages import wide_head_short_configs
from decode_wide_stages import wide_dot_4_configs


def then_grids(held_out: list) -> list:
    """A stage's shapes: `held_out` first, then the coverage grid's and the default and regimes grids' shapes (with
    --only-changed, those the stage's variants launch otherwise), each once."""
    from kernels_probe.attention.grid import coverage_grid

    return held_out_first(held_out, held_out_first(coverage_grid(), grid_and_regimes_configs()))


def wide_head_rule_variants(base):
    """Probe 1.14.0 and two head-dim-256 launch rules, alone and together: a block-fill split rounded down to whole
    tiles where rounding up leaves the launch short of the programs page blocks need (block_fill_shorter_min_seqs; here
    for blocks of any size), and
    base-tile launches over private pages split to fill whole waves of two resident programs per SM
    (wide_head_wave_ctas), in any number of waves or in one."""
    r = dataclasses.replace
    return [("default", base), ("fill down", r(base, block_fill_shorter_min_seqs=1)),
            ("waves of 2/SM", r(base, wide_head_wave_ctas=2)),
            ("one wave of 2/SM", r(base, wide_head_wave_ctas=2, wide_head_wave_max=1)),
            ("fill down, waves of 2/SM", r(base, block_fill_shorter_min_seqs=1, wide_head_wave_ctas=2))]


def wide_head_rule_configs():
    """Held-out head-dim-256 shapes no rule was read from (2-64 sequences over 1.2K-31K tokens, as config.json lays
    out Gemma-2B (8 query heads, 1 KV head), Gemma-3-12B (16, 8), Gemma-3-4B (8, 4), Gemma-2-2B (8, 4, fp8),
    Gemma-7B at TP 4 (4, 4), Qwen3-Next-80B's full-attention layers (16, 2), Gemma-3-1B (4, 1), Gemma-2-9B (16, 8)
    and at TP 2 (8, 4), Gemma-7B at TP 2 (8, 8)); nine of them in block fill's class, a shared prefix of most of
    the context over 2-32 sequences (chosen among those whose launch the rounded-down split changes: 223 of 1,920
    such layouts x batches x contexts on 132 SMs change); then wide-head-short's shapes, whose rows the two rules
    were read off (with --only-changed, those a variant launches otherwise)."""
    from kernels_probe.attention.grid import AttentionConfig as C

    held_out = [C(3072, 24, 1, 192, 8, 1, 256), C(6144, 10, 1, 320, 2, 8, 256), C(2560, 20, 1, 448, 2, 4, 256),
                C(7168, 12, 1, 256, 2, 4, 256, "fp8"), C(3584, 16, 1, 384, 1, 4, 256),
                C(30720, 3, 1, 512, 8, 2, 256), C(1536, 64, 1, 256, 4, 1, 256), C(12288, 5, 1, 128, 2, 8, 256),
                C(16384, 3, 1, 256, 2, 4, 256), C(4608, 6, 1, 512, 2, 4, 256, "fp8"),
                C(1792, 20, 1, 160, 1, 8, 256), C(1024, 40, 1, 768, 2, 4, 256),
                # shared prefixes of most of the context over few sequences: block fill's class
                C(7424, 12, 1, 96, 8, 2, 256), C(13312, 16, 1, 96, 4, 1, 256), C(4608, 32, 1, 192, 8, 1, 256),
                C(5632, 10, 1, 96, 2, 4, 256), C(4608, 4, 1, 384, 1, 8, 256), C(13312, 2, 1, 768, 2, 8, 256),
                C(4608, 10, 1, 384, 1, 4, 256), C(26624, 6, 1, 192, 4, 1, 256), C(9728, 8, 1, 96, 8, 2, 256, "fp8")]
    return held_out_first(held_out, wide_head_short_configs())


def wide_dot_four_variants(base):
    """Probe 1.14.0 and blocks of four sequences in a 64-row dot on 64-token long-context tiles only where probe
    1.14.0's launch forms blocks of two in the wide dot and the new launch splits and leaves 1.8+ working programs
    per SM (wide_dot_four_min_programs_per_sm): the class of wide-dot-4's rows that won 11 of 12."""
    four = dataclasses.replace(base, wide_dot_four_min_programs_per_sm=1.8)
    return [("default", base), ("blocks of four, 1.8+/SM", four)]


def wide_dot_four_configs():
    """Held-out shapes of 9-16 query heads per KV head over a shared prefix no rule was read from, as config.json lays
    out GLM-4-9B (32 query heads, 2 KV heads), Llama-3.1-405B at TP 8 and 4 (16 and 32 query heads over 1 and 2 KV
    heads), Qwen3-Coder-480B at TP 8 (12, 1), Qwen3-235B at TP 4 and 2 (16, 1; 32, 2), Mistral-Large-2 at TP 4 (24,
    2), Command-R+ at TP 2 (48, 4) and TP 1 (96, 8), GLM-4.5 at TP 4 (24, 2) and ChatGLM3-6B (32, 2), the last five
    chosen among those whose launch the rule changes (1,495 of 2,592 such layouts x batches x contexts on 132 SMs);
    then wide-dot-4's shapes, which the rule was read off (with --only-changed, those it launches otherwise)."""
    from kernels_probe.attention.grid import AttentionConfig as C

    held_out = [C(6144, 64, 1, 512, 16, 2), C(3072, 96, 1, 256, 16, 1), C(10240, 48, 1, 384, 12, 1),
                C(20480, 32, 1, 256, 16, 1), C(2560, 128, 1, 640, 12, 2), C(12288, 32, 1, 128, 12, 4),
                C(3072, 16, 8, 1024, 12, 2), C(8192, 48, 1, 256, 16, 2, 128, "fp8"), C(16384, 24, 1, 2048, 16, 2),
                C(1024, 256, 1, 256, 16, 2), C(2048, 8, 16, 128, 16, 1), C(6144, 32, 2, 320, 12, 2),
                C(5120, 24, 1, 3072, 12, 8), C(7168, 128, 1, 1024, 16, 1), C(15360, 48, 1, 384, 12, 2),
                C(5120, 64, 1, 3072, 16, 1), C(11264, 48, 1, 128, 16, 2)]
    return held_out_first(held_out, wide_dot_4_configs())


def wide_head_fill_variants(base):
    """Probe 1.15.0 without it and block fill's split rounded down where blocks hold four or more sequences
    (block_fill_shorter_min_seqs 4): in wide-head-rules every such launch won, 1.04-1.37x, and blocks of two lost 8
    of 11."""
    return [("default", base), ("fill down, blocks of 4+", dataclasses.replace(base, block_fill_shorter_min_seqs=4))]


def wide_head_fill_configs():
    """Held-out head-dim-256 shapes in that class (a shared prefix of most of the context, blocks of four: chosen
    among the 74 of 1,600 layouts x batches x contexts on 132 SMs whose launch the rule changes), as config.json lays
    out Gemma-2-2B (8 query heads, 4 KV heads; bf16 and fp8), Gemma-3-4B (8, 4), Gemma-3-1B (4, 1), Gemma-3-12B
    (16, 8), Gemma-7B at TP 2 and 4 (8, 8; 4, 4); then wide-head-rules' shapes, which the rule was read off (with
    --only-changed, those it launches otherwise)."""
    from kernels_probe.attention.grid import AttentionConfig as C

    held_out = [C(11008, 4, 1, 640, 2, 4, 256), C(14848, 4, 1, 64, 2, 4, 256), C(5120, 28, 1, 64, 4, 1, 256),
                C(6656, 32, 1, 320, 4, 1, 256), C(6656, 4, 1, 320, 2, 8, 256), C(6656, 4, 1, 320, 1, 8, 256),
                C(21504, 12, 1, 320, 4, 1, 256), C(14848, 4, 1, 160, 1, 4, 256), C(3840, 40, 1, 64, 4, 1, 256),
                C(11008, 4, 1, 320, 2, 4, 256, "fp8")]
    return held_out_first(held_out, wide_head_rule_configs())


def wide_head_wave_shared_variants(base):
    """Probe 1.15.0 and its whole-wave split at head dim 256 over shared pages too, where neither launch forms a page
    block (wide_head_wave_shared): those launches ran as their private twins did before the rule, which gained
    1.015-1.17x from it (device-2026-12-07, wide-head-rules.json)."""
    shared = dataclasses.replace(base, wide_head_wave_shared=True)
    return [("default", base), ("waves over shared pages, no block", shared)]


def wide_head_wave_shared_configs():
    """Held-out head-dim-256 shapes of that class (batches that blocks cannot divide, or prefixes too short for one;
    chosen among the 564 of 3,960 layouts x batches x contexts on 132 SMs whose launch the rule changes), as
    config.json lays out Gemma-2-2B (8 query heads, 4 KV heads; bf16 and fp8), Qwen3-Next-80B's full-attention
    layers (16, 2), Gemma-7B at TP 2 and 4 (8, 8; 4, 4), Gemma-3-12B (16, 8), Gemma-3-4B (8, 4), Gemma-3-1B (4, 1)
    and Gemma-2-9B (16, 8); then wide-head-rules' shapes, two of whose shared rows suggested it (with
    --only-changed, those it launches otherwise)."""
    from kernels_probe.attention.grid import AttentionConfig as C

    held_out = [C(5632, 7, 1, 256, 2, 4, 256), C(28672, 5, 1, 128, 8, 2, 256), C(2304, 6, 1, 128, 1, 8, 256),
                C(8704, 5, 1, 128, 1, 4, 256), C(2304, 3, 1, 2048, 2, 8, 256), C(12800, 5, 1, 128, 8, 2, 256),
                C(19456, 2, 1, 1024, 2, 4, 256), C(8704, 6, 1, 128, 2, 4, 256, "fp8"), C(19456, 7, 1, 256, 4, 1, 256),
                C(3584, 5, 1, 2048, 2, 8, 256)]
    return held_out_first(held_out, wide_head_rule_configs())


def double_dot_variants(base):
    """Probe 1.15.0 and blocks of twice the sequences in a 32-row dot where its blocks of 1-8 query heads per KV head
    fill the 16-row dot and the new launch leaves 1.8+ working programs per SM (double_dot_min_programs_per_sm): the
    analogue at 1-8 query heads of wide_dot_four, whose 1.8+ key won 11 of 12 held-out rows at 9-16."""
    return [("default", base), ("doubled dot, 1.8+/SM", dataclasses.replace(base, double_dot_min_programs_per_sm=1.8))]


def double_dot_configs():
    """Held-out shapes of 2-8 query heads per KV head over a shared prefix no rule was read from, as config.json lays
    out Qwen2.5-7B (28 query heads, 4 KV heads), Qwen2.5-14B (40, 8), Qwen2.5-72B (64, 8), Llama-3.1-70B at TP 2 (32,
    4), Qwen2.5-1.5B (12, 2), Qwen2.5-0.5B (14, 2, head dim 64), Qwen2.5-3B (16, 2), Yi-1.5-34B (56, 8),
    InternLM2-20B (48, 8), Phi-3-medium (40, 10), Mixtral-8x22B (48, 8, fp8), Llama-3.2-3B (24, 8), Gemma-2-27B (32,
    16) and Qwen3-14B (40, 8, fp8), chosen among those whose launch the rule changes (863 of 1,575 such layouts x
    batches x contexts on 132 SMs); then the coverage grid's shapes (its worst row over shared pages, 128 x 4 KV
    heads at 1K + 128, G 7, in blocks of two, suggested the rule), the default grid's and the regimes grid's (with
    --only-changed, those it launches otherwise)."""
    from kernels_probe.attention.grid import AttentionConfig as C

    held_out = [C(1536, 256, 1, 256, 7, 4), C(3072, 64, 1, 64, 5, 8), C(1536, 384, 1, 64, 8, 8),
                C(10240, 48, 1, 64, 8, 4), C(6144, 96, 1, 768, 6, 2), C(1536, 192, 1, 256, 7, 2, 64),
                C(10240, 48, 1, 256, 8, 2), C(3072, 256, 1, 64, 7, 8), C(10240, 64, 1, 256, 6, 8),
                C(10240, 192, 1, 256, 4, 10), C(6144, 128, 1, 256, 6, 8, 128, "fp8"), C(3072, 256, 1, 64, 3, 8),
                C(3072, 256, 1, 128, 2, 16), C(1536, 384, 1, 128, 7, 4), C(2048, 128, 1, 256, 5, 8, 128, "fp8")]
    # each grid shape once: the coverage grid shares rows with the default and regimes grids
    return then_grids(held_out)


def double_dot_keyed_variants(base):
    """Probe 1.16.0 and the doubled dot keyed to head dims of 128+, blocks of at most eight and 128-token tiles
    (double_dot_min_head_dim, _max_seqs, _min_block_n): double-dot's losses lay outside that key."""
    keyed = dataclasses.replace(base, double_dot_min_programs_per_sm=1.8, double_dot_min_head_dim=128,
                                double_dot_max_seqs=8, double_dot_min_block_n=128)
    return [("default", base), ("doubled dot, keyed", keyed)]


def double_dot_keyed_configs():
    """Held-out shapes in the keyed class no rule was read from, as config.json lays out Mistral-Nemo-12B (32 query
    heads, 8 KV heads), Llama-4-Scout (40, 8), Codestral-22B (48, 8), Qwen2-57B-A14B (28, 4), Qwen3-32B (64, 8), Phi-4
    (40, 10, fp8), Granite-3-8B at TP 2 (16, 4), Llama-3.1-70B at TP 4 (16, 2), Qwen2.5-Coder-32B (40, 8, fp8) and
    Mixtral-8x7B (32, 8); then double-dot's shapes, whose rows the key was read off (with --only-changed, those it
    launches otherwise)."""
    from kernels_probe.attention.grid import AttentionConfig as C

    held_out = [C(2560, 320, 1, 192, 4, 8), C(7168, 128, 1, 384, 5, 8), C(1792, 160, 1, 96, 6, 8),
                C(5120, 128, 1, 512, 7, 4), C(12288, 32, 1, 128, 8, 8), C(4608, 256, 1, 96, 4, 10, 128, "fp8"),
                C(3584, 512, 1, 160, 4, 4), C(20480, 24, 1, 320, 8, 2), C(2560, 192, 1, 448, 5, 8, 128, "fp8"),
                C(8192, 384, 1, 128, 4, 8)]
    return held_out_first(held_out, double_dot_configs())


def filled_blocks_variants(base):
    """Probe 1.16.0 and the unsplit batch-filled launch in page blocks where a split launch over a known shared
    prefix has 3.5 (the rule) or 3.0 programs per SM before splitting (filled_blocks_min_programs_per_sm): the oracle
    found it 1.54x faster than the default on the coverage grid's worst row over shared pages. Its file
    (benchmarks/raw/device-2026-12-07c/filled-blocks.json) timed the rule before it kept blocks from shrinking;
    run again, both variants keep them."""
    r = dataclasses.replace
    return [("default", base), ("filled blocks, 3.5+/SM", r(base, filled_blocks_min_programs_per_sm=3.5)),
            ("filled blocks, 3.0+/SM", r(base, filled_blocks_min_programs_per_sm=3.0))]


def filled_blocks_configs():
    """Held-out shapes no rule was read from, batches of 3-4 (sequence, KV head) items per SM over a shared prefix of
    768-1,152 tokens (the class the rule changes: two base-tile splits),
    as config.json lays out Llama-3.1-8B (32 query heads, 8 KV heads), Mistral-7B (32, 8), Qwen2.5-7B (28, 4),
    Qwen2.5-14B (40, 8), Gemma-2-9B (16, 8, head dim 256), Qwen2.5-1.5B (12, 2), Phi-3-medium (40, 10),
    Llama-3.1-70B at TP 2 (32, 4), GLM-4-9B (32, 2), Mixtral-8x7B (32, 8, fp8), Qwen3-8B (32, 8), Llama-3.2-3B
    (24, 8), Qwen2.5-3B (16, 2) and Yi-1.5-9B (32, 4); then the coverage, default and regimes grids' shapes (the
    coverage grid's 128 x 4 KV heads at 1K + 128, G 7, suggested the rule; with --only-changed, those it launches
    otherwise)."""
    from kernels_probe.attention.grid import AttentionConfig as C

    held_out = [C(1024, 60, 1, 64, 4, 8), C(768, 62, 1, 128, 4, 8), C(1024, 120, 1, 256, 7, 4),
                C(1024, 64, 1, 192, 5, 8), C(1024, 64, 1, 128, 2, 8, 256), C(896, 240, 1, 96, 6, 2),
                C(1024, 48, 1, 128, 4, 10), C(1024, 124, 1, 64, 8, 4), C(1024, 256, 1, 128, 16, 2),
                C(1024, 64, 1, 256, 4, 8, 128, "fp8"), C(1024, 56, 1, 128, 4, 8), C(768, 52, 1, 64, 3, 8),
                C(1024, 208, 1, 64, 8, 2), C(1152, 112, 1, 128, 8, 4)]
    return then_grids(held_out)


def floor_splits_variants(base):
    """Probe 1.17.0 and one split fewer where the base target's split count only rounds the target up and one fewer
    still leaves 3.5 programs per SM (floor_splits_min_programs_per_sm), down to two splits or down to one (probe
    1.18.0): the oracle found 128 x 2 KV heads at 1K + 128, G 16, 1.28x faster in 2 splits than in 3
    (device-2026-12-07c, oracle-2.log) and, on the same tile without blocks, 128 x 4 at G 7 faster unsplit than in 2
    (oracle.json). Timed in device-2026-12-07d (floor-splits.json, floor-splits-ours.json)."""
    r = dataclasses.replace
    return [("default", base), ("one split fewer, >= 2", r(base, floor_splits_min_programs_per_sm=3.5)),
            ("one split fewer, >= 1", r(base, floor_splits_min_programs_per_sm=3.5, floor_splits_min_splits=1))]


def floor_splits_configs():
    """Held-out shapes no rule was read from, in the class the rule changes (base-tile launches of 2-9 splits over 1-3K
    tokens whose (sequence, KV head) items give 3.5-4 programs per SM at one split fewer: of 366 layouts x contexts
    x batches aimed at that window on 132 SMs, 159 change), as config.json lays out Llama-3.1-8B (32 query heads, 8
    KV heads; two batches), Qwen2.5-7B (28, 4), Qwen2.5-14B (40, 8), Yi-1.5-9B (32, 4, fp8), GLM-4-9B (32, 2),
    Qwen2.5-1.5B (12, 2), Phi-3-medium (40, 10), Llama-3.1-70B at TP 4 (16, 2) and at TP 8 (8, 1), Gemma-2-9B (16,
    8, head dim 256), Llama-3.2-1B (32, 8, head dim 64), Mistral-7B (32, 8, fp8), Qwen2.5-3B (16, 2) and Qwen3-4B
    (32, 8); then the coverage, default and regimes grids' shapes (the coverage grid's 128 x 2 KV heads at 1K + 128,
    G 16, suggested the rule; with --only-changed, those it launches otherwise)."""
    from kernels_probe.attention.grid import AttentionConfig as C

    held_out = [C(1536, 31, 1, 128, 4, 8), C(2048, 41, 1, 128, 7, 4), C(1024, 15, 1, 256, 5, 8),
                C(1536, 31, 1, 128, 8, 4, 128, "fp8"), C(768, 124, 1, 128, 16, 2), C(2048, 82, 1, 128, 6, 2),
                C(1024, 25, 1, 256, 4, 10), C(3072, 30, 1, 256, 8, 2), C(1024, 123, 1, 1024, 8, 1),
                C(1024, 15, 1, 256, 2, 8, 256), C(1536, 15, 1, 128, 4, 8, 64),
                C(1024, 20, 1, 1024, 4, 8, 128, "fp8"), C(1024, 247, 1, 256, 8, 2), C(768, 62, 1, 128, 4, 8),
                C(2048, 20, 1, 128, 4, 8)]
    return then_grids(held_out)


def few_programs_variants(base):
    """Probe 1.18.0 and three launch changes read off the oracle's rows it still loses (device-2026-12-07d):
    the long-context tile (128 tokens, four warps, page numbers ahead) for base-tile launches over shared pages in
    page blocks that leave fewer than 2.5 or 1.5 working programs per SM (8 x 40 KV heads at 1K + 128, G 1: 0.93x ->
    1.12x with it), the blocks-of-four wide-dot launch in one split fewer where 1.8 working programs per SM remain
    (128 x 2 KV heads at 4K + 128, G 16: 0.99x -> 1.12x in 4 splits instead of 5), and one split fewer down to 2
    programs per SM instead of 3.5 (8 x 40 at 1K + 128 over private pages: 0.95x -> 1.11x unsplit), and over an fp8
    cache the batch-filled launch on the base tile (64 x 40 at 4K + 128 over private pages: 0.95x -> 1.07x).
    Timed against probe 1.18.0 in device-2026-12-07e (few-programs.json), where the fp8 variant ran the base tile over
    shared pages too (0.60-1.18x there); probe 1.19.0 keeps it to private pages, the tile below 1.25 working programs
    per SM, the wide dot's split to private tails of up to 256 tokens (probe-1-19.json), the floor as timed."""
    r = dataclasses.replace
    return [("default", base), ("few-programs tile < 2.5/SM", r(base, few_programs_tile_max_programs_per_sm=2.5)),
            ("few-programs tile < 1.5/SM", r(base, few_programs_tile_max_programs_per_sm=1.5)),
            ("wide dot four, one split fewer", r(base, wide_dot_four_fewer_max_private_tokens=1 << 30)),
            ("one split fewer, >= 2/SM", r(base, floor_splits_min_programs_per_sm=2.0)),
            ("fp8 filled on the base tile", r(base, fp8_private_filled_base_tile=True))]


def few_programs_configs():
    """Held-out shapes no rule was read from, in the classes the variants change (of 16 model layouts x 12 batches x
    7 prefixes x 3 suffixes on 132 SMs: 381 for the tile at 2.5, 170 for the wide-dot split, 135 for the floor at 2),
    as config.json lays out Qwen2.5-14B (40 query heads, 8 KV heads), Qwen2.5-7B (28, 4; two), Llama-3.1-8B (32, 8;
    two), Yi-1.5-9B (32, 4, fp8), Llama-3.2-1B (32, 8, head dim 64), Phi-3-medium (40, 10), Llama-3.2-3B (24, 8;
    two), Qwen3-32B (64, 8), Falcon-40B (128, 8, head dim 64; two), Qwen3-235B-A22B at TP 2 (32, 2), Llama-3.1-405B
    at TP 8 (16, 1), GLM-4-9B (32, 2), Mistral-7B (32, 8, fp8; two), Qwen2.5-3B (16, 2), and over fp8 Yi-1.5-9B
    (32, 4) and Qwen2.5-7B; then the coverage, default and
    regimes grids' shapes (with --only-changed, those some variant launches otherwise: 26 of 250)."""
    from kernels_probe.attention.grid import AttentionConfig as C

    held_out = [C(3072, 12, 1, 256, 5, 8), C(8192, 6, 1, 128, 7, 4), C(2048, 12, 1, 128, 4, 8),
                C(3072, 16, 1, 128, 8, 4, 128, "fp8"), C(3072, 8, 1, 256, 4, 8, 64), C(2048, 16, 1, 128, 4, 10),
                C(8192, 4, 1, 256, 3, 8), C(1536, 24, 1, 128, 8, 8), C(1536, 48, 1, 256, 7, 4),
                C(6144, 16, 1, 128, 16, 8, 64), C(8192, 48, 1, 128, 16, 2), C(8192, 96, 1, 256, 16, 1),
                C(6144, 128, 1, 256, 16, 2), C(1536, 64, 1, 128, 16, 8, 64), C(1536, 24, 1, 128, 4, 8),
                C(768, 48, 1, 128, 3, 8), C(1536, 24, 1, 256, 4, 8, 128, "fp8"), C(1536, 96, 1, 128, 8, 2),
                C(2048, 128, 1, 128, 4, 8, 128, "fp8"), C(3072, 256, 1, 128, 8, 4, 128, "fp8"),
                C(1536, 192, 1, 256, 7, 4, 128, "fp8")]
    return then_grids(held_out)


def probe_1_19_variants(base):
    """Probe 1.18.0 (`base`) and probe 1.19.0, whose four rules few-programs.json (device-2026-12-07e) timed one by
    one."""
    from cascade_plan.own_kernel_tune import DEFAULT_TUNE

    return [("default", base), ("probe 1.19.0", DEFAULT_TUNE)]


def probe_1_19_configs():
    """Held-out shapes chosen after probe 1.19.0's rules were set, from models none of its stages used, six per rule
    (of 16 layouts x 14 batches x 5 prefixes x 3 suffixes on 132 SMs, 88 change tile, 276 split over private pages,
    72 the wide dot's split, 330 fp8's batch-filled tile): Mistral-Nemo-12B (32 query heads, 8 KV heads; bf16 and
    fp8), Gemma-2-27B (32, 16; two), Llama-3.1-8B (fp8; two), SmolLM2-1.7B (32, 32, head dim 64), Qwen3-8B (fp8),
    Command-R (64, 8), Mixtral-8x22B (48, 8), Qwen2.5-0.5B (14, 2, head dim 64), Llama-3.1-405B at TP 4 (32, 2;
    three), Llama-3.1-70B at TP 4 (16, 2), Qwen3-235B-A22B at TP 4 (16, 1; three), Falcon-40B at TP 2 (64, 4, head
    dim 64; two) and Qwen2.5-7B (fp8; two); then the coverage, default and regimes grids' shapes."""
    from kernels_probe.attention.grid import AttentionConfig as C

    f8 = (128, "fp8")
    held_out = [C(640, 40, 1, 192, 4, 8), C(1280, 20, 1, 96, 2, 16), C(2560, 12, 1, 384, 4, 8, *f8),
                C(2560, 4, 1, 192, 1, 32, 64), C(1280, 20, 1, 384, 4, 8, *f8), C(640, 20, 1, 96, 2, 16),
                C(640, 56, 1, 96, 8, 8), C(1280, 28, 1, 96, 6, 8), C(640, 224, 1, 384, 7, 2, 64),
                C(1280, 224, 1, 96, 16, 2), C(2560, 56, 1, 192, 8, 2), C(640, 28, 1, 192, 4, 8, *f8),
                C(10240, 112, 1, 192, 16, 1), C(5120, 80, 1, 384, 16, 2), C(10240, 40, 1, 384, 16, 4, 64),
                C(5120, 80, 1, 384, 16, 4, 64), C(2560, 320, 1, 96, 16, 1), C(5120, 160, 1, 96, 16, 1),
                C(5120, 320, 1, 96, 4, 8, *f8), C(10240, 160, 1, 96, 4, 8, *f8), C(1280, 160, 1, 96, 4, 8, *f8),
                C(2560, 448, 1, 192, 7, 4, *f8), C(1280, 112, 1, 384, 4, 8, *f8), C(2560, 160, 1, 96, 7, 4, *f8)]
    return then_grids(held_out)


def probe_1_19_fresh_configs():
    """More held-out shapes, chosen after probe-1-19.json keyed the wide dot's split to private tails of up to 256
    tokens, from models no stage used before: the wide dot's split (7: Llama-3.1-405B at TP 4 (32 query heads, 2 KV
    heads; two), Qwen3-235B-A22B at TP 2 (32, 2), Llama-3.1-405B at TP 8 (16, 1; two), Falcon-40B (128, 8, head dim
    64), Qwen2.5-72B-like 12 query heads per KV head at 4 KV heads), the tile at about one working program per SM (6:
    Mistral-Small-24B (32, 8; two), Granite-3-8B (32, 8, fp8; two), Llama-3.2-1B (fp8, head dim 64), Llama-3.1-8B
    (fp8)) and one split fewer over private pages (6: Yi-34B (56, 8), Phi-4 (40, 10), Mistral-Small-24B,
    Gemma-3-27B, Llama-3.2-1B (fp8) and a 14-query-head single-KV-head layout)."""
    from kernels_probe.attention.grid import AttentionConfig as C

    f8 = (128, "fp8")
    return [C(3584, 160, 1, 224, 16, 2), C(12288, 72, 1, 96, 16, 2), C(4096, 240, 1, 256, 16, 1),
            C(9216, 24, 1, 128, 16, 8, 64), C(6144, 200, 1, 32, 16, 1), C(3072, 96, 1, 208, 16, 2),
            C(12288, 40, 1, 240, 12, 4), C(832, 36, 1, 144, 4, 8), C(832, 36, 1, 272, 4, 8, *f8),
            C(832, 36, 1, 48, 4, 8, 64, "fp8"), C(896, 36, 1, 160, 4, 8), C(2304, 16, 1, 224, 4, 8, *f8),
            C(832, 36, 1, 48, 4, 8, *f8), C(1664, 26, 1, 48, 7, 8), C(1664, 14, 1, 48, 4, 10), C(832, 18, 1, 272, 4, 8),
            C(832, 26, 1, 144, 2, 16), C(2944, 100, 1, 48, 4, 8, 64, "fp8"), C(1152, 150, 1, 96, 14, 1)]


def tile_splits_variants(base):
    """Probe 1.19.0 and its 128-token tile also below 2.5 working programs per SM where the launch has 4 or more
    splits, or 6 or more (few_programs_tile_split_max_programs_per_sm, few_programs_tile_min_splits): in
    few-programs.json (device-2026-12-07e) the tile at 1.45-2.18 gained on 7 of 8 launches of 6-33 splits and lost on
    7 of 8 of 2-3; the coverage grid's 8 x 8 KV heads at 4K + 128, G 5 (0.97 under 1.19.0) is one of the first."""
    r = dataclasses.replace
    return [("default", base),
            ("tile < 2.5/SM at 4+ splits", r(base, few_programs_tile_split_max_programs_per_sm=2.5,
                                            few_programs_tile_min_splits=4)),
            ("tile < 2.5/SM at 6+ splits", r(base, few_programs_tile_split_max_programs_per_sm=2.5,
                                            few_programs_tile_min_splits=6))]


def tile_splits_configs():
    """Held-out shapes from models no stage used (of 9 layouts x 10 batches x 7 prefixes x 3 suffixes on 132 SMs, 178
    change at 4+ splits), as config.json lays out Aya-23-35B (64 query heads, 8 KV heads), Codestral-22B (48, 8;
    three), Llama-3.1-70B (64, 8), Qwen2-57B-A14B (28, 4; two), DBRX (48, 8), InternLM2-20B (48, 8, fp8; two) and
    Llama-3.2-1B (32, 8, head dim 64; two); then the coverage, default and regimes grids' shapes (5 change)."""
    from kernels_probe.attention.grid import AttentionConfig as C

    f8 = (128, "fp8")
    held_out = [C(4096, 8, 1, 64, 8, 8), C(4096, 10, 1, 64, 6, 8), C(3072, 16, 1, 64, 8, 8), C(8192, 4, 1, 256, 6, 8),
                C(8192, 6, 1, 128, 7, 4), C(4096, 6, 1, 128, 6, 8), C(2048, 12, 1, 128, 6, 8, *f8),
                C(4096, 6, 1, 128, 4, 8, 64), C(3072, 16, 1, 128, 6, 8, *f8), C(2048, 24, 1, 256, 7, 4),
                C(16384, 2, 1, 256, 4, 8, 64), C(16384, 2, 1, 128, 6, 8)]
    return then_grids(held_out)


def wave_short_variants(base):
    """Probe 1.19.0 and its head-dim-256 wave rule also over launches whose splits run the short tile
    (wide_head_wave_short): the oracle (device-2026-12-07f) found 8 x 4 KV heads at 1K + 128 private tokens 1.10x
    FlashInfer's decode in 6 splits of 192 where the default's 9 of 128 ran 0.96x."""
    return [("default", base), ("waves on short tiles", dataclasses.replace(base, wide_head_wave_short=True))]


def wave_short_configs():
    """Held-out head-dim-256 shapes whose launch the rule changes (74 of 9 layouts x 12 batches x 8 contexts on 132
    SMs), as config.json lays out Gemma-2-2B (8 query heads, 4 KV heads; two), Gemma-2-9B (16, 8; two), Gemma-7B
    (16, 16; two), Gemma-2B (8, 1; two), Gemma-3-1B (4, 1), Qwen3-Next-80B's full-attention layers (16, 2; two),
    Gemma-7B at TP 4 (4, 4) and at TP 2 (8, 8), Gemma-2-9B at TP 2 (8, 4); four over fp8; then the coverage, default
    and regimes grids' shapes (one changes: the row the rule was read off)."""
    from kernels_probe.attention.grid import AttentionConfig as C

    d, f8 = 256, (256, "fp8")
    held_out = [C(3072, 3, 1, 128, 2, 4, d), C(4096, 4, 1, 128, 2, 4, *f8), C(2048, 2, 1, 128, 2, 8, d),
                C(1536, 4, 1, 128, 2, 8, d), C(3072, 1, 1, 128, 1, 16, d), C(1024, 2, 1, 128, 1, 16, *f8),
                C(2048, 16, 1, 128, 8, 1, d), C(1536, 32, 1, 128, 8, 1, d), C(4096, 12, 1, 128, 4, 1, d),
                C(3072, 8, 1, 128, 8, 2, *f8), C(1024, 16, 1, 128, 8, 2, d), C(2048, 6, 1, 128, 1, 4, d),
                C(2048, 4, 1, 128, 1, 8, d), C(1536, 8, 1, 128, 2, 4, *f8)]
    return then_grids(held_out)


def wave_floor_variants(base):
    """The current probe and its wave rule over short tiles also where one split fewer over private pages would move the
    launch onto the base tile (wide_head_wave_short_floored): a class no call timed (4 x 16 KV heads over 2,304
    tokens: 8 x 320 floored, 4 x 576 waved)."""
    return [("default", base), ("waves before the floor", dataclasses.replace(base, wide_head_wave_short_floored=True))]


def wave_floor_configs():
    """Held-out head-dim-256 shapes of that class over private pages (516 of 6,912 changed launches of 64 batches x 5
    KV-head counts x 4 group sizes x 64 contexts on 132 SMs), as config.json lays out Gemma-7B (16 query heads, 16 KV
    heads; three, one fp8) and at TP 2 (8, 8), Gemma-2-9B (16, 8; two) and at TP 2 (8, 4), Gemma-2-2B (8, 4; two,
    one fp8), Gemma-2B (8, 1), Qwen3-Next-80B's full-attention layers (16, 2) and Gemma-3-1B (4, 1); then the grids'
    shapes (none changes)."""
    from kernels_probe.attention.grid import AttentionConfig as C

    d, f8 = 256, (256, "fp8")
    held_out = [C(2176, 4, 1, 128, 1, 16, d), C(640, 12, 1, 128, 1, 16, d), C(1664, 5, 1, 128, 1, 16, *f8),
                C(3456, 5, 1, 128, 2, 8, d), C(1664, 10, 1, 128, 2, 8, d), C(3712, 9, 1, 128, 2, 4, d),
                C(2432, 14, 1, 128, 2, 4, *f8), C(2176, 60, 1, 128, 8, 1, d), C(2176, 32, 1, 128, 8, 2, d),
                C(2176, 64, 1, 128, 4, 1, d), C(2432, 7, 1, 128, 1, 8, d), C(2688, 13, 1, 128, 2, 4, d)]
    return then_grids(held_out)
