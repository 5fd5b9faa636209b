"""Stages of benchmarks/decode_vs_flashinfer.py that timed the per-sequence decode's rules of probes 1.12-1.15 (fp8
pairs, transposed dots, block fill, the wide dot's targets and blocks of four, head dim 256's tiles and waves):
each gives its configurations and its variants of a base tune, as STAGE_PLANS reads them."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from decode_launch_keys import plan_keys
from decode_split_stages import prefetch_configs
from decode_stage_shapes import grid_and_regimes_configs, held_out_first, shape_key
from decode_wide_head_stages import (
    LOSER_SHAPES_1_11,
    regimes_loser_configs,
    wide_head_configs,
    wide_head_private_variants,
)

from cascade_plan.own_kernel_tunes import PROBE_1_12_0_TUNE


def fp8_pair_variants(base):
    """The default, an fp8 cache read as int16 pairs of head dims everywhere (TuneParams.fp8_pairs): its tiles leave
    shared memory by ldmatrix, not scalar loads, and take 158-159 registers per thread on the 128-token tiles at head
    dim 128 where the converted fp8 tile takes 251-253, with no spills at head dim 256 where that one spills 72-144
    bytes (`python -m kernels_probe.attention.pipelining`); and pairs in per-sequence decode launches of at most 2.25
    working programs per SM at head dim 128 only (decode_fp8_pairs), the rule read off the first variant's H100 rows
    (benchmarks/raw/device-2026-12-06i/fp8-pairs.json)."""
    r = dataclasses.replace
    return [("default", base), ("fp8 pairs", r(base, fp8_pairs=True)),
            ("fp8 pairs <= 2.25/SM", r(base, fp8_pairs=True, fp8_pairs_max_programs_per_sm=2.25,
                                       fp8_pairs_max_head_dim=128))]


def swap_ab_variants(base):
    """The default and its decode dots transposed (decode_swap_ab: keys and head dims as the dots' M rows, warpgroup
    MMAs from shared memory on sm_90), on four warps: on two, Triton compiles them to mma.sync in 255 registers with
    spills; on four, 96 registers at head dim 128 on the base tile where the default's take 183 (`python -m
    kernels_probe.attention.pipelining`). Triton's pipeliner gives the transposed tiles one buffer more: the base tile
    runs on two stages (70 KB, as the default's three), and the 128-token tiles (136 KB: one program per SM) are also
    timed at 64 tokens (70 KB). fp8 keeps the default's dots (converted and transposed, its tiles spill)."""
    r = dataclasses.replace
    swap = r(base, decode_swap_ab=True, decode_warps=4, decode_stages=2)
    return [("default", base), ("swap AB", swap),
            ("swap AB, 64-token tiles", r(swap, decode_block_n_large_batch=64, long_block_n=64))]


def swap_ab_configs():
    """regimes-losers' bf16 shapes (rows probe 1.11.0 lost and one-sequence ones), then the default grid's bf16 ones."""
    from kernels_probe.attention.grid import build_grid

    out = [c for c in regimes_loser_configs() if c.kv_dtype == "bf16"]
    cfgs, _ = build_grid()
    return out + [c for c in cfgs if c not in out and c.kv_dtype == "bf16"]


def fp8_capped_changes(c) -> bool:
    """Does fp8_pair_variants' capped rule launch shape `c` otherwise than probe 1.12.0's tune, the launch it was
    read against (on 132 SMs)?"""
    capped = fp8_pair_variants(PROBE_1_12_0_TUNE)[-1][1]
    return plan_keys(c, capped, 132, device="cpu") != plan_keys(c, PROBE_1_12_0_TUNE, 132, device="cpu")


def fp8_configs():
    """Every fp8 shape of the coverage and regimes grids and wide-head's two held-out fp8 ones (head dim 256): first
    those whose launch the capped rule (fp8_pair_variants' last) changes, then the rows probe 1.11.0 lost
    (LOSER_SHAPES_1_11), so that a call's limit cuts the others."""
    out = [c for c in every_grid_shape() if c.kv_dtype == "fp8"]
    return sorted(out, key=lambda c: (not fp8_capped_changes(c), shape_key(c) not in LOSER_SHAPES_1_11))


def fp8_capped_variants(base):
    """The default and fp8_pair_variants' capped rule alone (pairs at <= 2.25 working programs per SM, head dim 128)."""
    default, _, capped = fp8_pair_variants(base)
    return [default, capped]


def fp8_capped_configs():
    """fp8_configs' shapes whose launch the capped rule changes, those benchmarks/raw/device-2026-12-06i/fp8-pairs.json
    did not time first (head dim 64, 6-16 query heads per KV head, 64K): the rule's own check on shapes it was not
    read off."""
    raw = Path(__file__).parent / "raw" / "device-2026-12-06i" / "fp8-pairs.json"
    timed = [r["config"] for r in json.loads(raw.read_text())["rows"]] if raw.exists() else []
    changed = [c for c in every_grid_shape() if c.kv_dtype == "fp8" and fp8_capped_changes(c)]
    return sorted(changed, key=lambda c: c.as_dict() in timed)


def block_fill_variants(base):
    """The default and launches that split a shared prefix into shorter splits where the default's programs are too
    few for page blocks (TuneParams.block_fill_programs_per_sm: 1 or 2 working programs per SM, splits of at least
    64, 128 or 256 tokens), so that each block reads the prefix once: 8 sequences x 4 KV heads at 4K + 128, head dim
    256, read 138 MB of K/V in 352 programs (0.79x FlashInfer's decode on an H100, device-2026-12-06h), 17 MB in 33
    splits of 128 tokens in blocks of 8."""
    r = dataclasses.replace
    return [("default", base), ("fill 1/SM", r(base, block_fill_programs_per_sm=1)),
            ("fill 2/SM", r(base, block_fill_programs_per_sm=2)),
            ("fill 1/SM, 256+", r(base, block_fill_programs_per_sm=1, block_fill_min_tokens=256)),
            ("fill 2/SM, 64+", r(base, block_fill_programs_per_sm=2, block_fill_min_tokens=64))]


def block_fill_configs():
    """The coverage, regimes and wide-head shapes (with --only-changed, the 22 whose launch a block_fill_variants
    variant changes: all over shared pages), the rows probe 1.11.0 lost first."""
    return sorted(every_grid_shape(), key=lambda c: shape_key(c) not in LOSER_SHAPES_1_11)


def next_rules_variants(base):
    """The default (here probe 1.12.0's tune, PROBE_1_12_0_TUNE), each launch rule the device-2026-12-06j call read
    off alone, and all three: fp8 pairs in decode launches of at most 2.25 working programs per SM at head dim 128 or
    less (fp8_pair_variants' capped rule: 20 of 20 shapes it changes at 1.00-1.07x over private pages); a shared
    prefix split for page blocks at head dim 256 (block_fill_programs_per_sm 1, splits of 256+ tokens: 8 x 4 KV
    heads at 4K + 128 1.35x); fp8's streaming launch at 4 programs per SM (fp8_stream_programs_per_sm: 1.22-1.40x on
    3 fp8 shapes)."""
    r = dataclasses.replace
    pairs = dict(fp8_pairs=True, fp8_pairs_max_programs_per_sm=2.25, fp8_pairs_max_head_dim=128)
    fill = dict(block_fill_programs_per_sm=1, block_fill_min_tokens=256, block_fill_min_head_dim=256)
    stream = dict(fp8_stream_programs_per_sm=4)
    return [("default", base), ("pairs <= 2.25/SM", r(base, **pairs)), ("block fill d256", r(base, **fill)),
            ("fp8 stream 4", r(base, **stream)), ("all three", r(base, **pairs, **fill, **stream))]


def next_rules_configs():
    """22 held-out shapes first, chosen for the three rules of next_rules_variants and read off none of them (models as
    their config.json lays out heads: Llama-3-8B 4 x 8 KV heads, Qwen2.5-7B 7 x 4, a 70B's TP-8 shard 8 x 1,
    Qwen3-30B 8 x 4, Gemma-3-4B 2 x 4 at head dim 256, Gemma-2-9B 2 x 8, Gemma-3-1B 4 x 1, Qwen3-Next's full
    attention 8 x 2), then the coverage, regimes and wide-head shapes the rules were read off."""
    from kernels_probe.attention.grid import AttentionConfig as C

    held_out = [C(65536, 4, 1, 128, 4, 8, 128, "fp8"), C(32768, 32, 1, 128, 4, 8, 128, "fp8"),
                C(65536, 16, 1, 128, 7, 4, 128, "fp8"), C(131072, 16, 1, 128, 8, 1, 128, "fp8"),
                C(2048, 32, 1, 16384, 4, 8, 128, "fp8"), C(1024, 8, 1, 32768, 8, 4, 128, "fp8"),
                C(65536, 8, 1, 128, 4, 8, 64, "fp8"), C(8192, 8, 1, 1024, 4, 8, 128, "fp8"),
                C(2048, 32, 1, 128, 4, 8, 128, "fp8"), C(16384, 2, 1, 128, 8, 4, 128, "fp8"),
                C(8192, 4, 1, 128, 2, 4, 256), C(6144, 8, 1, 512, 2, 4, 256), C(1024, 32, 1, 128, 2, 4, 256),
                C(4096, 4, 1, 128, 2, 8, 256), C(2048, 8, 1, 512, 2, 8, 256), C(8192, 2, 1, 64, 2, 8, 256),
                C(4096, 32, 1, 128, 4, 1, 256), C(8192, 16, 1, 512, 4, 1, 256), C(4096, 16, 1, 128, 8, 2, 256),
                C(2048, 32, 1, 512, 8, 2, 256), C(6144, 16, 1, 64, 2, 2, 256), C(4096, 8, 1, 128, 2, 4, 256, "fp8")]
    return held_out_first(held_out, every_grid_shape())


def wide_dot_target_variants(base):
    """The default and split targets of 2 and 3 programs per SM (twice that for the long-context launch) where blocks
    of two fill the wide dot over a known shared prefix (wide_dot_programs_per_sm): on an H100 2 and 4 took 12 query
    heads per KV head at 16K x 8 and 4K x 128 1.13-1.24x faster over shared pages (device-2026-12-06j,
    regimes-losers.log)."""
    r = dataclasses.replace
    return [("default", base), ("wide dot 2/SM", r(base, wide_dot_programs_per_sm=2)),
            ("wide dot 3/SM", r(base, wide_dot_programs_per_sm=3))]


def wide_dot_target_configs():
    """Held-out shapes of 9-16 query heads per KV head first, as models' config.json lay out their heads (a
    Mistral-Large-2-like layer at TP 8: 1 KV head x 12, at TP 4: 2 x 12; a Llama-3.1-405B-like one at TP 8: 1 x 16;
    a GLM-4-9B-like one: 2 x 16; a Qwen3-235B-like one at TP 4: 1 x 16), then the grids' (with --only-changed, those
    whose shared-pages launch the targets change)."""
    from kernels_probe.attention.grid import AttentionConfig as C

    held_out = [C(32768, 16, 1, 256, 12, 1, 128), C(8192, 64, 1, 512, 12, 1, 128), C(2048, 256, 1, 128, 12, 1, 128),
                C(4096, 32, 1, 128, 12, 2, 128), C(16384, 32, 1, 128, 16, 1, 128), C(4096, 128, 1, 1024, 16, 1, 128),
                C(65536, 8, 1, 128, 16, 1, 128), C(8192, 16, 1, 512, 16, 2, 128), C(2048, 64, 1, 2048, 16, 2, 128),
                C(1024, 256, 1, 128, 16, 2, 128), C(131072, 4, 1, 128, 16, 1, 128),
                C(4096, 64, 1, 256, 16, 2, 128, "fp8"), C(16384, 16, 1, 256, 12, 1, 128, "fp8")]
    return held_out_first(held_out, every_grid_shape())


def wide_dot_long_variants(base):
    """The default, wide-dot targets of 2 per SM only where the default's long-context launch makes 16 or more
    splits (wide_dot_min_splits: the six rows of device-2026-12-06k that 2 per SM took 1.19-1.31x faster, none it
    lost), and 2 per SM everywhere."""
    r = dataclasses.replace
    keyed = r(base, wide_dot_programs_per_sm=2, wide_dot_min_splits=16)
    return [("default", base), ("wide dot 2/SM, 16+ splits", keyed), wide_dot_target_variants(base)[1]]


def wide_dot_long_configs():
    """Held-out shapes no wide-dot rule was read from, 9-16 query heads per KV head at long shared prefixes over few
    sequences (a Mistral-Large-2-like layer at TP 8 and 4: 1 and 2 KV heads x 12; Llama-3.1-405B at TP 8: 1 x 16; a
    GLM-4-9B-like one: 2 x 16; Qwen3-235B at TP 4: 1 x 16; a Falcon-40B-like one at TP 8, head dim 64: 1 x 16), bf16
    and fp8; then the grids' and wide-dot-targets' shapes (with --only-changed, those the keyed rule launches
    otherwise)."""
    from kernels_probe.attention.grid import AttentionConfig as C

    held_out = [C(65536, 4, 1, 128, 12, 1, 128), C(16384, 32, 1, 512, 12, 1, 128), C(32768, 8, 1, 128, 12, 2, 128),
                C(32768, 16, 1, 128, 16, 1, 128), C(131072, 2, 1, 256, 16, 1, 128), C(32768, 4, 1, 128, 16, 2, 128),
                C(16384, 16, 1, 1024, 16, 2, 128), C(8192, 32, 1, 2048, 16, 1, 128), C(16384, 16, 1, 128, 16, 1, 64),
                C(32768, 8, 1, 128, 16, 1, 128, "fp8"), C(16384, 8, 1, 256, 16, 2, 128, "fp8"),
                C(8192, 64, 1, 128, 12, 1, 128), C(4096, 64, 1, 128, 16, 1, 128)]
    return held_out_first(held_out, wide_dot_target_configs())


def wide_dot_tail_variants(base):
    """The default, wide_dot_long_variants' keyed targets, and those only where a sequence's private tail is at most
    512 tokens (wide_dot_max_private_tokens): on the keyed rule's held-out shapes (device-2026-12-06l) the one row it
    lost, 0.87x, had a 1,024-token tail, and the one level row 2,048; every row it won had 512 or fewer."""
    keyed = wide_dot_long_variants(base)[1]
    return [("default", base), keyed, ("keyed, tails <= 512", dataclasses.replace(keyed[1],
                                                                               wide_dot_max_private_tokens=512))]


def wide_dot_tail_configs():
    """Held-out shapes no wide-dot rule was read from, as models with 12 or 16 query heads per KV head lay out a
    GPU's heads (config.json): GLM-4.5 at TP 8 (1 KV head x 12), Command-R+ at TP 4 (2 x 12), Qwen3-Coder-480B at
    TP 8 (1 x 12), ChatGLM3-6B (2 x 16), Llama-3.1-405B at TP 4 (2 x 16) and TP 8 (1 x 16), Qwen3-235B at TP 2 (2 x
    16), GLM-4.5-Air at TP 4 over fp8 (2 x 12), a Falcon-40B-like head-dim-64 layer at TP 8 (1 x 16), Mistral-Large-2
    at TP 2 (4 x 12); private tails of 64-512 tokens at 12K-96K; then two of 768 and 1,536 tokens that the tail cap
    leaves alone; then wide-dot-long's shapes (with --only-changed, those a variant launches otherwise)."""
    from kernels_probe.attention.grid import AttentionConfig as C

    held_out = [C(49152, 8, 1, 384, 12, 1, 128), C(24576, 12, 1, 256, 12, 2, 128), C(98304, 6, 1, 64, 12, 1, 128),
                C(12288, 24, 1, 512, 16, 2, 128), C(20480, 10, 1, 320, 16, 2, 128), C(40960, 6, 1, 448, 16, 2, 128),
                C(24576, 16, 1, 192, 12, 2, 128, "fp8"), C(32768, 12, 1, 256, 16, 1, 64),
                C(24576, 6, 1, 128, 12, 4, 128), C(8192, 48, 1, 512, 16, 1, 128),
                C(24576, 12, 1, 768, 12, 2, 128), C(12288, 24, 1, 1536, 16, 1, 128)]
    return held_out_first(held_out, wide_dot_long_configs())


def wide_dot_4_variants(base):
    """Probe 1.14.0 and blocks of four sequences of 9-16 query heads in a 64-row dot (wide_dot_seqs): over shared
    pages FlashInfer's decode ran 6 of 23 such rows faster than ours in blocks of two (device-2026-12-06l,
    wide-dot-tails), at about half our private-pages time; with its wide-dot targets, with probe 1.13.0's (4 and 8
    per SM: a block of four leaves a quarter of the programs working), and on 64-token long-context tiles of two
    stages: compiled for sm_90 (python -m kernels_probe.attention.pipelining, Triton 3.9) the 64-row dot on the
    128-token tile takes 255 registers, spills 104-112 bytes and 145 KB of shared memory (one program per SM), on
    the 64-token tile 255 registers, no spill, 80 KB and double-buffered K/V (two per SM)."""
    r = dataclasses.replace
    four = r(base, wide_dot_seqs=4)
    return [("default", base), ("4 seqs", four), ("4 seqs, targets 4/8", r(four, wide_dot_programs_per_sm=0)),
            ("4 seqs, 64-token long tiles", r(four, long_block_n=64, wide_dot_block_n=64))]


def wide_dot_4_configs():
    """wide_dot_tail_configs' shapes of 9-16 query heads per KV head (with --only-changed, those a variant launches
    otherwise: the 64-token variant changes every long-context launch, so the stage keeps to these)."""
    return [c for c in wide_dot_tail_configs() if 9 <= c.q_per_kv <= 16]


def regimes_next_variants(base):
    """The default and the rules not yet on, alone and together, for the regimes grid's ratio table in one call:
    wide_dot_long_variants' keyed targets, wide_dot_target_variants' 2 per SM, wide_head_private_variants' 2 per SM.
    A variant whose launch matches an earlier one's on a row takes that figure, so these cost only the rows they
    change."""
    both = dataclasses.replace(base, wide_dot_programs_per_sm=2, wide_head_private_programs_per_sm=2)
    return [("default", base), wide_dot_long_variants(base)[1], wide_dot_target_variants(base)[1],
            wide_head_private_variants(base)[1], ("both", both)]


def prefix_split_configs():
    """The two rows probe 1.9.0 still lost (prefix_split_variants)."""
    return [c for c in prefetch_configs() if (c.prefix_tokens, c.suffix_tokens, c.group_size, c.num_kv_heads,
                                              c.q_per_kv, c.kv_dtype) in ((1024, 4096, 64, 8, 4, "bf16"),
                                                                          (1024, 4096, 256, 8, 4, "bf16"))]


def every_grid_shape() -> list:
    """The coverage and regimes grids' shapes and wide-head's, each once, in that order."""
    out: list = []
    for c in grid_and_regimes_configs() + wide_head_configs():
        if c not in out:
            out.append(c)
    return out
