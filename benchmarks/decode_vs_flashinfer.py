"""Our Triton per-sequence decode against FlashInfer's decode, on a GPU (development tool; prints tables).

    python benchmarks/decode_vs_flashinfer.py sweep [--out rows.json]     # launch variants on the shapes that lose
    python benchmarks/decode_vs_flashinfer.py grid  [--out rows.json]     # the default tune on every probe row
    python benchmarks/decode_vs_flashinfer.py splits [--out rows.json]    # split-K targets where shared pages lose
    python benchmarks/decode_vs_flashinfer.py pages [--out rows.json]     # page-aware blocks on and off
    python benchmarks/decode_vs_flashinfer.py tiny [--out rows.json]      # shorter splits where the batch is tiny
    python benchmarks/decode_vs_flashinfer.py losers [--out rows.json]    # block caps, prefix splits, tiles
    python benchmarks/decode_vs_flashinfer.py conditions [--out rows.json] # one kernel timed after heavy work,
                                                                          # after an idle gap, and back to back
    python benchmarks/decode_vs_flashinfer.py filled [--out rows.json]    # probe 1.3's batch-filled launch: whole
                                                                          # tiles (benchmarks/filled_launch_check.py)
    python benchmarks/decode_vs_flashinfer.py tiles [--out rows.json]     # tile, pipeline and warp variants where
                                                                          # probe 1.5.3 lost on the H200
    python benchmarks/decode_vs_flashinfer.py long [--out rows.json]      # long-context split targets on every
                                                                          # probe shape whose launch they change
    python benchmarks/decode_vs_flashinfer.py fi-tiles [--out rows.json]  # FlashInfer's decode time against the
                                                                          # tokens read: whole tiles or tokens?
    python benchmarks/decode_vs_flashinfer.py waves [--out rows.json]     # wave-filling splits and other launches
                                                                          # on the rows probe 1.5.5 still lost
    python benchmarks/decode_vs_flashinfer.py prefetch [--out rows.json]  # page numbers an iteration ahead (K/V
                                                                          # double-buffered) and the tiles it moves,
                                                                          # on the lost rows, then the default grid
    python benchmarks/decode_vs_flashinfer.py fused [--out rows.json]     # split decodes merging their own splits
    python benchmarks/decode_vs_flashinfer.py stream [--out rows.json]    # the streaming launch over private tokens
                                                                          # against probe 1.7.2's, the cascade too
    python benchmarks/decode_vs_flashinfer.py rules [--out rows.json]     # tiny launches merged in their own
                                                                          # programs; base tiles where the batch
                                                                          # fills the GPU and at long contexts

Our decode is told what the probe tells it: the shared prefix over shared pages, nothing shared over duplicated ones.
Each shape is built as the probe builds it (``kernels_probe.attention.data``), each kernel is checked against the
float32 reference on poisoned outputs before it is timed, and timed as the probe times it (a CUDA graph, L2 flushed
before each replay). FlashInfer's figure is the faster of its two decode variants (CUDA cores, tensor cores).
The ratio is FlashInfer's time over ours: >= 1.0 means ours is at least as fast.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, ".")

import decode_body_stages as body_stages  # noqa: E402  (benchmarks/, beside this script)
import decode_rule_stages as rule_stages  # noqa: E402

from cascade_plan.own_kernel_tune import DEFAULT_TUNE  # noqa: E402  (the checkout's package)
from cascade_plan.own_kernel_tunes import (  # noqa: E402
    PROBE_1_5_2_TUNE,
    PROBE_1_12_0_TUNE,
    PROBE_1_13_0_TUNE,
    PROBE_1_14_0_TUNE,
    PROBE_1_15_0_TUNE,
    PROBE_1_16_0_TUNE,
    PROBE_1_17_0_TUNE,
    PROBE_1_18_0_TUNE,
    PROBE_1_19_0_TUNE,
    PROBE_1_20_0_TUNE,
)

TOL = 1e-2


def sweep_configs():
    from kernels_probe.attention.grid import AttentionConfig as A

    return [
        A(prefix_tokens=4096, group_size=64, q_per_kv=1, num_kv_heads=40, kv_dtype="fp8"),
        A(prefix_tokens=4096, group_size=128, q_per_kv=1, num_kv_heads=40),
        A(prefix_tokens=32768, group_size=16),
        A(prefix_tokens=65536, group_size=4),
        A(prefix_tokens=16384, group_size=16, suffix_tokens=0),
        A(prefix_tokens=32768, group_size=1, q_per_kv=8, num_kv_heads=1),
        A(prefix_tokens=32768, group_size=64, q_per_kv=8, num_kv_heads=1),
        A(prefix_tokens=4096, group_size=64, q_per_kv=8, kv_dtype="fp8"),
        A(prefix_tokens=4096, group_size=64, kv_dtype="fp8"),
        A(prefix_tokens=16384, group_size=128, q_per_kv=16, num_kv_heads=2),
        A(prefix_tokens=4096, group_size=256),
        A(prefix_tokens=1024, group_size=16, suffix_tokens=4096),
        A(prefix_tokens=256, group_size=1024),
        A(prefix_tokens=131072, group_size=8),
        A(prefix_tokens=4096, group_size=1, q_per_kv=8, num_kv_heads=1),
        A(prefix_tokens=16384, group_size=4, kv_dtype="fp8"),
        A(prefix_tokens=1024, group_size=8, q_per_kv=5),
    ]


def sweep_variants(base):
    """(label, tune): the default first, then split targets x tile shapes (all with fp16 dots over fp8 and the
    many-slot merge)."""
    out = [("default", base)]
    for tgt in (4, 8):
        for bn, st, w in ((64, 3, 4), (32, 4, 4), (128, 2, 8)):
            t = dataclasses.replace(base, target_programs_per_sm=tgt, decode_block_n=bn, decode_stages=st,
                                    decode_warps=w, fp8_dot_fp16=True, merge_slots_min=16)
            out.append((f"t{tgt} bn{bn} s{st} w{w}", t))
    return out


def long_configs():
    """Shapes where our decode over shared prefix pages lost most to FlashInfer's (2026-12-03 grid): long prefixes
    at few sequences, and a mid batch."""
    from kernels_probe.attention.grid import AttentionConfig as A

    return [A(prefix_tokens=131072, group_size=8), A(prefix_tokens=262144, group_size=8),
            A(prefix_tokens=65536, group_size=16), A(prefix_tokens=32768, group_size=16),
            A(prefix_tokens=16384, group_size=64), A(prefix_tokens=4096, group_size=256),
            A(prefix_tokens=1024, group_size=16, n_groups=64, q_per_kv=6, num_kv_heads=2),
            A(prefix_tokens=131072, group_size=8, kv_dtype="fp8")]


def split_variants(base):
    """The default, then more programs per SM for long contexts (the split-K target where every split keeps
    long_min_tokens_per_split tokens), with 64- or 128-token tiles."""
    out = [("default", base)]
    for per_sm in (16, 32, 64):
        out.append((f"long {per_sm}/SM", dataclasses.replace(base, long_programs_per_sm=per_sm)))
    out.append(("long 16/SM bn128 s2", dataclasses.replace(base, long_programs_per_sm=16, decode_block_n=128,
                                                           decode_stages=2)))
    out.append(("bn128 s2 w8", dataclasses.replace(base, decode_block_n=128, decode_stages=2, decode_warps=8)))
    return out


def tiny_configs():
    """Launches of 1-4 sequences at 256-32K tokens: the default grid's rows where FlashInfer's decode was up to 1.25x
    faster than ours on an H100 (2026-12-05), latency-bound (15-40 us): 1-8 KV heads give 1-32 work items, so the
    split count stops at the tokens over min_tokens_per_split, not at the GPU's programs."""
    from kernels_probe.attention.grid import AttentionConfig as A

    return [A(prefix_tokens=4096, group_size=1, q_per_kv=8, num_kv_heads=1),
            A(prefix_tokens=1024, group_size=1, q_per_kv=8, num_kv_heads=1),
            A(prefix_tokens=1024, group_size=4, q_per_kv=1, num_kv_heads=8),
            A(prefix_tokens=4096, group_size=4, q_per_kv=1, num_kv_heads=8),
            A(prefix_tokens=4096, group_size=1), A(prefix_tokens=1024, group_size=1),
            A(prefix_tokens=256, group_size=1),
            A(prefix_tokens=4096, group_size=4), A(prefix_tokens=32768, group_size=1),
            A(prefix_tokens=16384, group_size=4, q_per_kv=1, num_kv_heads=8),
            A(prefix_tokens=4096, group_size=4, q_per_kv=8, num_kv_heads=8)]


def tiny_variants(base):
    """The default, then shorter splits (more programs, each one or two tiles) and a smaller short-split tile."""
    out = [("default", base)]
    for mt in (128, 64):
        out.append((f"min {mt}", dataclasses.replace(base, min_tokens_per_split=mt)))
    out.append(("min 128 short bn32 s3", dataclasses.replace(base, min_tokens_per_split=128, decode_short_block_n=32,
                                                             decode_short_stages=3)))
    out.append(("short 2 warps", dataclasses.replace(base, decode_short_warps=2)))
    out.append(("min 128 short 2 warps", dataclasses.replace(base, min_tokens_per_split=128, decode_short_warps=2)))
    return out


def loser_configs():
    """The default grid's rows below 1.0x FlashInfer's best decode on an H100 with probe 1.5.2 (2026-12-05,
    benchmarks/raw/device-2026-12-05/decode-ratio-152b.txt): blocks of 16 at one program per two SMs, blocks of two
    over three splits, batches that fill the GPU unsplit at 1K-4K prompts with 1K-4K private tokens, 16 sequences at
    4K + 4K; then rows where blocks win now (they must not lose)."""
    from kernels_probe.attention.grid import AttentionConfig as A

    return [A(prefix_tokens=1024, group_size=64, q_per_kv=1),
            A(prefix_tokens=1024, group_size=256, q_per_kv=8, num_kv_heads=1),
            A(prefix_tokens=4096, group_size=256, suffix_tokens=4096),
            A(prefix_tokens=1024, group_size=256, suffix_tokens=1024),
            A(prefix_tokens=1024, group_size=256, suffix_tokens=4096),
            A(prefix_tokens=4096, group_size=16, suffix_tokens=4096),
            A(prefix_tokens=1024, group_size=16, suffix_tokens=1024),
            A(prefix_tokens=1024, group_size=16, suffix_tokens=4096),
            A(prefix_tokens=32768, group_size=1),
            A(prefix_tokens=4096, group_size=4, q_per_kv=1),
            A(prefix_tokens=4096, group_size=64, q_per_kv=8, num_kv_heads=1),
            A(prefix_tokens=1024, group_size=64, q_per_kv=4),
            A(prefix_tokens=1024, group_size=64, q_per_kv=8),
            A(prefix_tokens=4096, group_size=256),
            A(prefix_tokens=16384, group_size=64),
            A(prefix_tokens=4096, group_size=64, q_per_kv=1, num_kv_heads=40, kv_dtype="fp8"),
            A(prefix_tokens=1024, group_size=16, n_groups=64, q_per_kv=6, num_kv_heads=2),
            A(prefix_tokens=1024, group_size=256, suffix_tokens=1024, kv_dtype="fp8")]


def filled_configs():
    """The planner's batch-filled launch (cost/roofline.py filled_gain), falsifiable: a batch that fills the GPU alone
    streams whole 128-token tiles, so 528 tokens (5 tiles) should cost as 640 do, 1.25x 512 (4), and 4,112 as 4,224;
    below the launch (512 rows) time follows the tokens. fp8 (where the fit found the launch 1.36x faster) and bf16
    (where it found none). Contexts are whole 16-token pages, as the probe builds them."""
    from kernels_probe.attention.grid import AttentionConfig as A

    out = []
    for kv in ("fp8", "bf16"):
        out += [A(prefix_tokens=512, group_size=16, n_groups=64, suffix_tokens=s, q_per_kv=6, num_kv_heads=2,
                  kv_dtype=kv) for s in (0, 16, 128)]
        out += [A(prefix_tokens=4096, group_size=64, n_groups=8, suffix_tokens=s, q_per_kv=5, kv_dtype=kv)
                for s in (0, 16, 128)]
        out += [A(prefix_tokens=4096, group_size=64, suffix_tokens=s, kv_dtype=kv) for s in (0, 16, 128)]
    # whole tiles in bf16 too, where the fit kept no gain: a 1K prompt at 1,024 sequences, 512 tokens at 512 x 8 heads
    for kv in ("bf16", "fp8"):
        out += [A(prefix_tokens=1024, group_size=16, n_groups=64, suffix_tokens=s, q_per_kv=6, num_kv_heads=2,
                  kv_dtype=kv) for s in (0, 16, 128)]
        out += [A(prefix_tokens=512, group_size=16, n_groups=32, suffix_tokens=s, kv_dtype=kv) for s in (0, 16, 128)]
    return out


def tile_configs():
    """The H200's rows furthest below FlashInfer's decode with probe 1.5.3 (benchmarks/raw/device-2026-12-05d/
    default.json: 0.80-0.95x): blocks of two at 256 sequences x 1 KV head, long private suffixes after a shared
    prefix, G 1 at 64 sequences, and long contexts over private pages at 4-16 sequences (bf16 and fp8); then head dims
    64 and 256, groups of 6 and 12, and a batch that fills the GPU unsplit, where a new base tile must not lose."""
    from kernels_probe.attention.grid import AttentionConfig as A

    return [A(prefix_tokens=1024, group_size=256, q_per_kv=8, num_kv_heads=1),
            A(prefix_tokens=4096, group_size=16, suffix_tokens=4096),
            A(prefix_tokens=1024, group_size=16, suffix_tokens=1024),
            A(prefix_tokens=1024, group_size=64, q_per_kv=1),
            A(prefix_tokens=32768, group_size=16, q_per_kv=8, num_kv_heads=1),
            A(prefix_tokens=16384, group_size=4, q_per_kv=1),
            A(prefix_tokens=4096, group_size=4, q_per_kv=1),
            A(prefix_tokens=16384, group_size=4, kv_dtype="fp8"),
            A(prefix_tokens=1024, group_size=64, kv_dtype="fp8"),
            A(prefix_tokens=4096, group_size=64, q_per_kv=8, num_kv_heads=1),
            A(prefix_tokens=32768, group_size=4),
            A(prefix_tokens=4096, group_size=16, q_per_kv=2, num_kv_heads=4, head_dim=256),
            A(prefix_tokens=1024, group_size=64, q_per_kv=7, num_kv_heads=2, head_dim=64),
            A(prefix_tokens=4096, group_size=16, q_per_kv=6, num_kv_heads=2),
            A(prefix_tokens=1024, group_size=16, n_groups=4, q_per_kv=12, num_kv_heads=8),
            A(prefix_tokens=1024, group_size=256, suffix_tokens=1024)]


def tile_variants(base):
    """Probe 1.5.3's tune (four warps on every decode tile), the default (two on the base tile), then one knob at a
    time on top of the default: two warps on the batch-filled and the short tile, shallower or deeper base
    pipelines, fewer long-context splits, no page blocks (128-token base tiles lost at two warps and four:
    benchmarks/raw/device-2026-12-05e/tiles-2.log)."""
    from cascade_plan.own_kernel_tunes import PROBE_1_5_3_TUNE

    r = dataclasses.replace
    return [("probe 1.5.3", PROBE_1_5_3_TUNE), ("default", base),
            ("filled w2", r(base, decode_warps_large_batch=2)), ("short w2", r(base, decode_short_warps=2)),
            ("base s2", r(base, decode_stages=2)), ("base s4", r(base, decode_stages=4)),
            ("long 8/SM", r(base, long_programs_per_sm=8)), ("long 12/SM", r(base, long_programs_per_sm=12)),
            ("no blocks", r(base, decode_page_group=1))]


def long_configs_changed(sm: int):
    """Every default-grid shape whose per-sequence decode launch (over shared or private pages) differs between probe
    1.5.4's long-context target (16 programs per SM) and the default's (8 since probe 1.5.5; on an H100 8 took 16
    sequences x 8 KV heads at 4K + 4K over shared pages from 0.85x FlashInfer's decode to 0.93x:
    benchmarks/raw/device-2026-12-05f/long.json, where the rows call 16 per SM "default" and 8 "long 8/SM"), then G 1
    at 4 sequences (0.93-0.95x with probe 1.5.4 on an H100), where a 64-token split floor is tried, and long private
    contexts split 26-52 ways (0.95-0.98x), where splits of 384 tokens are tried. `sm`: the GPU's SM count."""
    from cascade_plan.own_kernel_pages import decode_launch
    from cascade_plan.own_kernel_tune import DEFAULT_TUNE
    from cascade_plan.own_kernel_tunes import PROBE_1_5_4_TUNE
    from kernels_probe.attention.grid import AttentionConfig as A
    from kernels_probe.attention.grid import build_grid

    cfgs, _ = build_grid(coverage=False)

    def changes(c):
        t = c.prefix_tokens + c.suffix_tokens
        return any(decode_launch(c.batch, c.num_kv_heads, c.q_per_kv, t, sh, sm, DEFAULT_TUNE)
                   != decode_launch(c.batch, c.num_kv_heads, c.q_per_kv, t, sh, sm, PROBE_1_5_4_TUNE)
                   for sh in (c.root_tokens + c.prefix_tokens, 0))
    extra = [A(prefix_tokens=1024, group_size=4, q_per_kv=1), A(prefix_tokens=4096, group_size=4, q_per_kv=1),
             A(prefix_tokens=32768, group_size=16, q_per_kv=8, num_kv_heads=1), A(prefix_tokens=16384, group_size=4),
             A(prefix_tokens=16384, group_size=4, q_per_kv=1)]
    return [c for c in cfgs if changes(c)] + [c for c in extra if not changes(c)]


def long_variants(base):
    """The default (8 long-context programs per SM since probe 1.5.5), probe 1.5.4's 16, 12, long-context splits down
    to 384 tokens, and a 64-token split floor for tiny launches."""
    from cascade_plan.own_kernel_tunes import PROBE_1_5_4_TUNE

    r = dataclasses.replace
    return [("default", base), ("probe 1.5.4 (16/SM)", PROBE_1_5_4_TUNE),
            ("long 12/SM", r(base, long_programs_per_sm=12)), ("long min 384", r(base, long_min_tokens_per_split=384)),
            ("tiny floor 64", r(base, decode_min_tokens_per_split=64))]


def fi_tile_configs():
    """Qwen2.5-1.5B's attention shape at a rollout start (64 prompts of 512 tokens x 16 samples, 6 query heads per KV
    head, 2 KV heads) with 0-272 private tokens, fp8 and bf16 KV: whether FlashInfer's decode costs the tokens it reads
    or whole tiles of them. Its fp8 first step (512 + 1 tokens) ran 12% over the planner, which prices the 512-token row
    (benchmarks/raw/device-2026-12-05e/README.md); whole 256-token tiles would make 528 tokens cost 768."""
    from kernels_probe.attention.grid import AttentionConfig as A

    return [A(prefix_tokens=512, group_size=16, n_groups=64, suffix_tokens=s, q_per_kv=6, num_kv_heads=2, kv_dtype=kv)
            for kv in ("fp8", "bf16") for s in (0, 16, 128, 240, 256, 272)]


def wave_configs():
    """The 16 default-grid rows where probe 1.5.5's decode stayed below FlashInfer's on an H100 (0.92-1.00x,
    benchmarks/raw/device-2026-12-06/ratio.txt): long contexts at few work items, long private tails, G 1 at 4
    sequences."""
    from kernels_probe.attention.grid import AttentionConfig as A

    return [A(prefix_tokens=32768, group_size=1), A(prefix_tokens=4096, group_size=16, suffix_tokens=4096),
            A(prefix_tokens=32768, group_size=16, q_per_kv=8, num_kv_heads=1),
            A(prefix_tokens=1024, group_size=16, suffix_tokens=4096), A(prefix_tokens=4096, group_size=4, q_per_kv=1),
            A(prefix_tokens=1024, group_size=4, q_per_kv=1), A(prefix_tokens=16384, group_size=4, q_per_kv=1),
            A(prefix_tokens=16384, group_size=4, q_per_kv=8), A(prefix_tokens=1024, group_size=64, suffix_tokens=4096),
            A(prefix_tokens=16384, group_size=4), A(prefix_tokens=1024, group_size=256, suffix_tokens=4096),
            A(prefix_tokens=4096, group_size=64, q_per_kv=8, num_kv_heads=1),
            A(prefix_tokens=1024, group_size=64, q_per_kv=8), A(prefix_tokens=4096, group_size=256, q_per_kv=8,
                                                                 num_kv_heads=1)]


def wave_variants(base):
    """The default, split counts that fill whole waves of 2 or 3 resident long-tile programs per SM (the long tile's
    74 KB of shared memory and 162 registers allow 3 on Hopper), other long-context targets and warps, longer splits,
    and the base launch's warps, split floor and target."""
    r = dataclasses.replace
    return [("default", base), ("waves 3", r(base, long_wave_ctas=3)), ("waves 2", r(base, long_wave_ctas=2)),
            ("long 6/SM", r(base, long_programs_per_sm=6)),
            ("long 6/SM waves 3", r(base, long_programs_per_sm=6, long_wave_ctas=3)),
            ("long 12/SM", r(base, long_programs_per_sm=12)), ("long min 768", r(base, long_min_tokens_per_split=768)),
            ("long warps 8", r(base, long_warps=8)), ("base 4 warps", r(base, decode_warps=4)),
            ("base min 384", r(base, min_tokens_per_split=384)), ("base 3/SM", r(base, target_programs_per_sm=3)),
            ("base 6/SM", r(base, target_programs_per_sm=6))]


def prefetch_configs():
    """The rows probe 1.5.5 lost (wave_configs), then every other default-grid shape: the prefetch changes every
    kernel's tile loop, so the whole grid is its test."""
    from kernels_probe.attention.grid import build_grid

    first = wave_configs()
    cfgs, _ = build_grid(coverage=False)
    return first + [c for c in cfgs if c not in first]


def prefetch_variants(base):
    """Probe 1.5.5's kernels (page numbers loaded in the iteration that uses them: K/V single-buffered), the default
    (loaded an iteration ahead where a program's loop runs long: decode_prefetch, prefix_prefetch), and the base
    tile prefetching from 512-token splits. The first run of this stage (benchmarks/raw/device-2026-12-06c/
    prefetch-everywhere.json, where "default" prefetched everywhere) tried 3-stage 128-token tiles, 64-token
    batch-filled and long tiles, a 4-stage base tile and a 3-stage short tile."""
    from cascade_plan.own_kernel_tunes import PROBE_1_5_5_TUNE

    return [("probe 1.5.5", PROBE_1_5_5_TUNE), ("default", base),
            ("prefetch >= 512", dataclasses.replace(base, prefetch_min_tokens=512))]


def fused_variants(base):
    """Probe 1.6.0's kernels (a merge kernel after every split decode) and the default (each sequence's splits merged
    by the program that stores its last one, where the launch forms no page blocks and has few splits:
    decode_fused_merge). The first run of this stage (benchmarks/raw/device-2026-12-06d/fused-everywhere.json) fused
    every split launch and tried tiny launches split down to 64 tokens."""
    from cascade_plan.own_kernel_tunes import PROBE_1_6_0_TUNE

    return [("probe 1.6.0", PROBE_1_6_0_TUNE), ("default", base)]


def stream_variants(base):
    """Probe 1.7.2's launches (the long-context launch everywhere it applies), the default (the streaming launch over
    mostly private tokens: 2 programs per SM on the double-buffered base tile), and every split on the base tile with
    page prefetch (no short tile) with the tiny launch's split floor at 128 (as now), 256 and 384 tokens: the launches
    that beat FlashInfer's on the tiny rows in benchmarks/raw/device-2026-12-06e/oracle.json. Its first run
    (stream-h200.json, stream-h100.json) tried three programs per SM beside the default."""
    from cascade_plan.own_kernel_tunes import PROBE_1_7_2_TUNE

    r = dataclasses.replace
    pf = r(base, decode_short_tokens=0, prefetch_min_tokens=0)     # every split on the prefetching base tile
    return [("probe 1.7.2", PROBE_1_7_2_TUNE), ("default", base),
            ("base tile + prefetch", pf), ("... floor 256", r(pf, decode_min_tokens_per_split=256)),
            ("... floor 384", r(pf, decode_min_tokens_per_split=384, min_tokens_per_split=384))]


def rule_variants(base):
    """Probe 1.8.0's launches, the default (base tiles prefetch wherever the launch has at most 3 programs per SM:
    prefetch_max_programs_per_sm; a tiny launch of more than 12 splits takes 12, merged in its own programs:
    merge_capped_splits) and each of its two rules alone. The first run of this stage
    (benchmarks/raw/device-2026-12-06f/rules.json, the default grid) had the cap without the prefetch rule as its
    default, and tried the batch-filled and long-context launches on the double-buffered base tile (64 tokens,
    3 stages; 2 and 4 warps) instead of single-buffered 128-token tiles."""
    from cascade_plan.own_kernel_tunes import PROBE_1_8_0_TUNE

    r = dataclasses.replace
    return [("probe 1.8.0", PROBE_1_8_0_TUNE), ("default", base),
            ("prefetch rule alone", r(base, tiny_fused_programs_per_sm=0)),
            ("tiny cap alone", r(base, prefetch_max_programs_per_sm=0))]


def prefix_split_variants(base):
    """The default, and the launches that might take the two rows probe 1.9.0 still lost on an H100 (64 and 256
    sequences x 8 KV heads at 1K + 4K over shared pages, 0.97x FlashInfer's decode:
    benchmarks/raw/device-2026-12-06f/probe-1.9.0.json.gz): up to five splits at the shared prefix's end (the first
    split's blocks read the prefix once per block of four; it changes only those two rows of the default grid),
    programs ordered by KV head (consecutive programs read one head's shared prefix), and both. The batch-filled and
    long-context launches on the double-buffered base tile took them to 0.99x and 0.98x
    (benchmarks/raw/device-2026-12-06f/rules.json)."""
    r = dataclasses.replace
    return [("default", base), ("split at prefix <= 5", r(base, shared_split_max=5)),
            ("head-major", r(base, decode_head_major=True)),
            ("head-major, split at prefix <= 5", r(base, decode_head_major=True, shared_split_max=5))]


def head_split_variants(base):
    """The default, and an unsplit launch over a shared prefix too short for equal splits at its end in two splits:
    the prefix, read once per block, then the rest (own_kernel_pages.shared_head_split; shared_head_min_tokens).
    Its three runs (benchmarks/raw/device-2026-12-06g/head-split*.json) had that launch as the default and probe
    1.9.0's (the default now) beside it; the second also had each of them on the batch-filled tile (128 tokens,
    2 stages, 4 warps) wherever a batch that fills the GPU split at a shared prefix, the third the prefix in 512- and
    256-token splits, each read once per block: tunes no longer kept, all of them slower."""
    return [("default", base), ("head split", dataclasses.replace(base, shared_head_min_tokens=256))]


def grid_and_regimes_configs():
    """The coverage grid (the default probe's and its extra rows) and the regimes grid (kernels_probe.attention.grid),
    for --only-changed to pick the shapes a stage's variants launch differently: for head_split_variants 256
    sequences x 8 KV heads at 1K + 4K and 64 groups of 16 at 512 + 1K, for wide_dot_variants the 18 of 12 and 16
    query heads per KV head."""
    from kernels_probe.attention.grid import build_grid, regimes_grid

    cfgs, _ = build_grid(coverage=True)
    return list(cfgs) + [c for c in regimes_grid() if c not in cfgs]


def wide_dot_variants(base):
    """No blocks where one sequence's 9-16 query heads fill the 16-row dot (probe 1.9.0), and blocks of two
    sequences in a 32-row dot there on 128-token tiles (the default since probe 1.10.0: wide_dot_block_n) and on
    every tile. On an H100 the regimes grid's 12 query heads per KV head had read 0.75-0.98x FlashInfer's decode over
    shared pages without blocks (benchmarks/raw/device-2026-12-06g/regimes-decode.json). The stage's first run
    (wide-dot.json) called probe 1.9.0's launch "default" and blocks on every tile "wide dot"."""
    from cascade_plan.own_kernel_tunes import PROBE_1_9_0_TUNE

    return [("probe 1.9.0", PROBE_1_9_0_TUNE), ("default", base),
            ("wide dot, every tile", dataclasses.replace(base, wide_dot_block_n=1))]


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
        key = _shape_key(c)
        if key in LOSER_SHAPES_1_11 and key not in seen and not c.root_tokens:
            seen.add(key)
            out.append(c)
    return out


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


def held_out_first(held_out: list, rest: list) -> list:
    """A stage's shapes: the held-out ones (no rule was read from them) first, then `rest` without them."""
    return held_out + [c for c in rest if c not in held_out]


def every_grid_shape() -> list:
    """The coverage and regimes grids' shapes and wide-head's, each once, in that order."""
    out: list = []
    for c in grid_and_regimes_configs() + wide_head_configs():
        if c not in out:
            out.append(c)
    return out


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
    return sorted(out, key=lambda c: (not fp8_capped_changes(c), _shape_key(c) not in LOSER_SHAPES_1_11))


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
    return sorted(every_grid_shape(), key=lambda c: _shape_key(c) not in LOSER_SHAPES_1_11)


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


def regimes_next_variants(base):
    """The default and the rules not yet on, alone and together, for the regimes grid's ratio table in one call:
    wide_dot_long_variants' keyed targets, wide_dot_target_variants' 2 per SM, wide_head_private_variants' 2 per SM.
    A variant whose launch matches an earlier one's on a row takes that figure, so these cost only the rows they
    change."""
    both = dataclasses.replace(base, wide_dot_programs_per_sm=2, wide_head_private_programs_per_sm=2)
    return [("default", base), wide_dot_long_variants(base)[1], wide_dot_target_variants(base)[1],
            wide_head_private_variants(base)[1], ("both", both)]


def _shape_key(c) -> tuple:
    """A configuration as LOSER_SHAPES_1_11 names it."""
    return (c.prefix_tokens, c.group_size, c.n_groups, c.suffix_tokens, c.q_per_kv, c.num_kv_heads, c.head_dim,
            c.kv_dtype)


def regimes_configs():
    """The regimes grid (kernels_probe.attention.grid.regimes_grid: head dims 64 and 256, groups 6, 7 and 12, 1,024
    sequences, 128K-256K prefixes, 8K suffixes), for the decodes alone: the probe's `--grid regimes` times every
    backend's cascade too."""
    from kernels_probe.attention.grid import regimes_grid

    return regimes_grid()


def default_grid_configs():
    """The default grid (kernels_probe.attention.grid.build_grid: the probe a user runs without options), for the
    decodes alone: the probe times every backend's cascade too."""
    from kernels_probe.attention.grid import build_grid

    return list(build_grid()[0])


def coverage_configs():
    """The coverage grid (kernels_probe.attention.grid.coverage_grid: what the default grid lacks, the breakeven and
    the corners: 12-16 query heads per KV head among them), for the decodes alone: the probe's `--grid coverage`
    times every backend's cascade too."""
    from kernels_probe.attention.grid import coverage_grid

    return coverage_grid()


def prefix_split_configs():
    """The two rows probe 1.9.0 still lost (prefix_split_variants)."""
    return [c for c in prefetch_configs() if (c.prefix_tokens, c.suffix_tokens, c.group_size, c.num_kv_heads,
                                              c.q_per_kv, c.kv_dtype) in ((1024, 4096, 64, 8, 4, "bf16"),
                                                                          (1024, 4096, 256, 8, 4, "bf16"))]


def plan_keys(cfg, tune, sm: int, device="cuda") -> tuple:
    """(decode over shared pages, decode over duplicated pages or None, the cascade's suffix pass or None), each as
    launch_key gives it, from the plans the Triton backend builds for `cfg` under `tune` over shape-only inputs
    (data.shape_data, as kernels_probe.attention.precompile builds them): nothing is launched."""
    from kernels_probe.attention.data import shape_data
    from kernels_probe.attention.triton_backend import plans

    dec_s, dec_d, casc = plans(shape_data(cfg, device), sm_count=sm, tune=tune)
    return tuple(None if p is None else launch_key(p, tune) for p in (dec_s, dec_d, casc.suffix_plan))


def launches_differ(cfg, variants, sm: int) -> bool:
    """Does any variant launch a different decode (either page layout) or suffix pass than the first (plan_keys)?"""
    return len({plan_keys(cfg, t, sm) for _, t in variants}) > 1


def gpu_with_flashinfer() -> tuple:
    """(GPU 0's SM count, an L2 flusher for it, why FlashInfer cannot run or "" once its decode modules are built)."""
    import torch

    from kernels_probe.attention import flashinfer_backend
    from kernels_probe.timing import L2Flusher

    props = torch.cuda.get_device_properties(0)
    ok, why = flashinfer_backend.available()
    if ok:
        build = flashinfer_backend.warm_build("cuda")
        why = "" if build.get("ok") else f"build failed: {build.get('errors')}"
    return props.multi_processor_count, L2Flusher(props.L2_cache_size), why


def time_as_probe(fn, flusher) -> dict:
    """time_fn's figures, timed a second time where the probe would time its row again (kernels_probe/runner.py:
    100 us or more, or p90 over 1.1x p10), the faster round kept: long rows read 0.82-0.92x FlashInfer's here where
    the probe's retimed rows read 0.97-0.98x (benchmarks/raw/device-2026-12-06e/stream-tiny.json)."""
    from kernels_probe.runner import RETIME_MIN_S, RETIME_SPREAD
    from kernels_probe.timing import time_fn

    res = time_fn(fn, flusher)
    if res["median_s"] >= RETIME_MIN_S or res["p90_s"] > RETIME_SPREAD * res["p10_s"]:
        again = time_fn(fn, flusher)
        res = again if again["median_s"] < res["median_s"] else res
    return res


def checked_err(fn, out, ref) -> float:
    """Run `fn` (which writes `out`) over an output poisoned with NaN and return its error against `ref`: what was
    not written stays NaN and fails."""
    import torch

    from kernels_probe.attention.reference import max_rel_err
    from kernels_probe.attention.timed import poisoned_run

    poisoned_run(out, fn)()
    torch.cuda.synchronize()
    return max_rel_err(out, ref)


def launch_key(p, tune) -> tuple:
    """What a DecodePlan runs: its launch and the tune fields its kernels read besides the launch; two variants with
    the same key run the same kernels, so the second is not timed again."""
    return (p.splits, p.tps, p.block_n, p.stages, p.warps, p.seqs, tune.decode_head_major, tune.fp8_dot_fp16,
            p.pairs, tune.decode_swap_ab, p.prefetch, p.fused_merge, tune.merge_block_r, tune.merge_block_d,
            tune.merge_stages, tune.merge_slots_min, tune.merge_block_s, tune.decode_l2_hints, p.halves, p.maxnreg,
            p.lanes, tune.decode_unsigned_pages)


DUP_VARIANTS = ("probe 1.5.2", "unsplit bn64 s3", "head-major", "default")


def loser_variants(base):
    """Probe 1.5.2's tune (`base`; its rows in benchmarks/raw/device-2026-12-05b/losers.json say "default", then the
    default), then caps on the block size (and on it by the programs left running), no blocks, the split at the shared
    prefix's end, 64-token tiles where the batch fills the GPU unsplit, and the default tune last."""
    from cascade_plan.own_kernel_tune import DEFAULT_TUNE

    r = dataclasses.replace
    return [("probe 1.5.2", base), ("blocks <= 8", r(base, decode_page_group=8)),
            ("blocks <= 4", r(base, decode_page_group=4)),
            ("blocks <= 2", r(base, decode_page_group=2)), ("no blocks", r(base, decode_page_group=1)),
            ("active >= 1/SM", r(base, page_block_min_programs_per_sm=1)),
            ("active >= 2/SM", r(base, page_block_min_programs_per_sm=2)),
            ("prefix split", r(base, decode_shared_split=True)),
            ("prefix split, active >= 2/SM", r(base, decode_shared_split=True, page_block_min_programs_per_sm=2)),
            ("unsplit bn64 s3", r(base, decode_block_n_large_batch=64, decode_stages_large_batch=3)),
            ("head-major", r(base, decode_head_major=True)), ("default", DEFAULT_TUNE)]


# stage: (its configurations, its variants of a base tune, the base) for the stages that need nothing else. The
# stages of the rules probe 1.13.0 turned on keep probe 1.12.0's tune as their base ("default" in their files),
# those of the rule probe 1.14.0 turned on probe 1.13.0's, those of probe 1.15.0's rules probe 1.14.0's (or
# 1.15.0's without the rule), and those timed against probe 1.15.0 or 1.16.0 that one's tune: the launch those
# rules were timed against, which the current default leaves behind
STAGE_PLANS = {
    "sweep": (sweep_configs, sweep_variants, DEFAULT_TUNE),
    "splits": (long_configs, split_variants, DEFAULT_TUNE),
    "tiny": (tiny_configs, tiny_variants, DEFAULT_TUNE),
    "losers": (loser_configs, loser_variants, PROBE_1_5_2_TUNE),
    "tiles": (tile_configs, tile_variants, DEFAULT_TUNE),
    "waves": (wave_configs, wave_variants, DEFAULT_TUNE),
    "prefetch": (prefetch_configs, prefetch_variants, DEFAULT_TUNE),
    "fused": (prefetch_configs, fused_variants, DEFAULT_TUNE),
    "stream": (prefetch_configs, stream_variants, DEFAULT_TUNE),
    "rules": (prefetch_configs, rule_variants, DEFAULT_TUNE),
    "prefix-split": (prefix_split_configs, prefix_split_variants, DEFAULT_TUNE),
    "head-split": (grid_and_regimes_configs, head_split_variants, DEFAULT_TUNE),
    "fi-tiles": (fi_tile_configs, lambda base: [("default", base)], DEFAULT_TUNE),
    "regimes-decode": (regimes_configs, lambda base: [("default", base)], DEFAULT_TUNE),
    "coverage-decode": (coverage_configs, lambda base: [("default", base)], DEFAULT_TUNE),
    "grid-decode": (default_grid_configs, lambda base: [("default", base)], DEFAULT_TUNE),
    "wide-dot": (grid_and_regimes_configs, wide_dot_variants, DEFAULT_TUNE),
    "head-dim-256": (head_dim_256_configs, head_dim_256_variants, DEFAULT_TUNE),
    "wide-head": (wide_head_configs, wide_head_variants, DEFAULT_TUNE),
    "wide-head-waves": (wide_head_wave_configs, wide_head_wave_variants, DEFAULT_TUNE),
    "regimes-losers": (regimes_loser_configs, regimes_loser_variants, DEFAULT_TUNE),
    "fp8-pairs": (fp8_configs, fp8_pair_variants, PROBE_1_12_0_TUNE),
    "swap-ab": (swap_ab_configs, swap_ab_variants, DEFAULT_TUNE),
    "fp8-capped": (fp8_capped_configs, fp8_capped_variants, PROBE_1_12_0_TUNE),
    "block-fill": (block_fill_configs, block_fill_variants, PROBE_1_12_0_TUNE),
    "next-rules": (next_rules_configs, next_rules_variants, PROBE_1_12_0_TUNE),
    "wide-head-private": (wide_head_private_configs, wide_head_private_variants, DEFAULT_TUNE),
    "wide-dot-targets": (wide_dot_target_configs, wide_dot_target_variants, PROBE_1_13_0_TUNE),
    "regimes-next": (regimes_configs, regimes_next_variants, PROBE_1_13_0_TUNE),
    "wide-dot-long": (wide_dot_long_configs, wide_dot_long_variants, PROBE_1_13_0_TUNE),
    "wide-dot-tails": (wide_dot_tail_configs, wide_dot_tail_variants, PROBE_1_13_0_TUNE),
    "wide-dot-4": (wide_dot_4_configs, wide_dot_4_variants, PROBE_1_14_0_TUNE),
    "wide-head-tiles": (wide_head_tile_configs, wide_head_tile_variants, PROBE_1_14_0_TUNE),
    "wide-head-short": (wide_head_short_configs, wide_head_short_variants, PROBE_1_14_0_TUNE),
    "wide-head-rules": (rule_stages.wide_head_rule_configs, rule_stages.wide_head_rule_variants, PROBE_1_14_0_TUNE),
    "wide-dot-four": (rule_stages.wide_dot_four_configs, rule_stages.wide_dot_four_variants, PROBE_1_14_0_TUNE),
    # timed against probe 1.15.0 before it took the rule on
    "wide-head-fill": (rule_stages.wide_head_fill_configs, rule_stages.wide_head_fill_variants,
                       dataclasses.replace(DEFAULT_TUNE, block_fill_shorter_min_seqs=0)),
    "wide-head-wave-shared": (rule_stages.wide_head_wave_shared_configs, rule_stages.wide_head_wave_shared_variants,
                              PROBE_1_15_0_TUNE),
    "double-dot": (rule_stages.double_dot_configs, rule_stages.double_dot_variants, PROBE_1_15_0_TUNE),
    "double-dot-keyed": (rule_stages.double_dot_keyed_configs, rule_stages.double_dot_keyed_variants,
                         PROBE_1_16_0_TUNE),
    "filled-blocks": (rule_stages.filled_blocks_configs, rule_stages.filled_blocks_variants, PROBE_1_16_0_TUNE),
    "floor-splits": (rule_stages.floor_splits_configs, rule_stages.floor_splits_variants, PROBE_1_17_0_TUNE),
    "few-programs": (rule_stages.few_programs_configs, rule_stages.few_programs_variants, PROBE_1_18_0_TUNE),
    "probe-1-19": (rule_stages.probe_1_19_configs, rule_stages.probe_1_19_variants, PROBE_1_18_0_TUNE),
    "probe-1-19-fresh": (rule_stages.probe_1_19_fresh_configs, rule_stages.probe_1_19_variants, PROBE_1_18_0_TUNE),
    "tile-splits": (rule_stages.tile_splits_configs, rule_stages.tile_splits_variants, PROBE_1_19_0_TUNE),
    "wave-short": (rule_stages.wave_short_configs, rule_stages.wave_short_variants, PROBE_1_19_0_TUNE),
    "wave-floor": (rule_stages.wave_floor_configs, rule_stages.wave_floor_variants, DEFAULT_TUNE),
    "l2-hints": (body_stages.l2_hint_configs, body_stages.l2_hint_variants, DEFAULT_TUNE),
    "wide-regs": (body_stages.wide_regs_configs, body_stages.wide_regs_variants, DEFAULT_TUNE),
    "lanes": (body_stages.kernel_body_configs, body_stages.lanes_variants, DEFAULT_TUNE),
    "unsigned-pages": (body_stages.kernel_body_configs, body_stages.unsigned_page_variants, PROBE_1_20_0_TUNE),
}
# the stages that also time the cascade where its suffix pass launches differently between their tunes
SUFFIX_CASCADE_STAGES = ("stream", "rules", "prefix-split", "head-split", "wide-dot", "head-dim-256", "wide-head",
                         "fp8-pairs", "swap-ab", "fp8-capped", "block-fill", "next-rules",
                         "wide-head-private", "wide-dot-targets", "wide-dot-long", "wide-dot-tails", "wide-dot-4",
                         "wide-head-tiles", "wide-head-short", "wide-head-rules", "wide-dot-four", "wide-head-fill",
                         "wide-head-wave-shared", "double-dot",
                         "double-dot-keyed")


def write_rows(path: str, build: dict, rows: list, sm: int) -> None:
    """The stage's file, written atomically (never half-written). FlashInfer's build thread may still be filling
    `build`: a copy is dumped."""
    from cascade_plan.atomic import write_text_atomic

    write_text_atomic(Path(path), json.dumps({"fi_build": dict(build), "rows": rows, "sm_count": sm}))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("stage", choices=[*STAGE_PLANS, "grid", "pages", "conditions", "filled", "long"])
    ap.add_argument("--out", default=None)
    ap.add_argument("--budget-s", type=float, default=400.0, help="stop starting new shapes after this long")
    ap.add_argument("--no-flashinfer", action="store_true", help="time our kernels only (tune against tune)")
    ap.add_argument("--only-changed", action="store_true",
                    help="grid and the variant stages: only the shapes whose decode launch (or cascade suffix launch) "
                         "differs between the tunes")
    ap.add_argument("--skip-timed", default=None, metavar="JSON",
                    help="skip the shapes this earlier file of the same stage already holds (a call that ran out of "
                         "time; its launches must be the same)")
    args = ap.parse_args()
    import torch

    from cascade_plan.own_kernel_launch import decode_launch_splits
    from cascade_plan.own_kernel_tunes import LONG_TILE_TUNE, PROBE_1_3_TUNE
    from kernels_probe.attention import flashinfer_backend
    from kernels_probe.attention.data import build_data, reference_output
    from kernels_probe.attention.grid import build_grid
    from kernels_probe.attention.triton_backend import shared_launch_tokens
    from kernels_probe.attention.triton_plans import CascadePlan, DecodePlan
    from kernels_probe.timing import L2Flusher

    if args.stage == "conditions":
        return conditions(args)
    t_start = time.perf_counter()
    props = torch.cuda.get_device_properties(0)
    sm = props.multi_processor_count
    flusher = L2Flusher(props.L2_cache_size)
    fi_ok, why = flashinfer_backend.available()
    fi_ok = fi_ok and not args.no_flashinfer
    build: dict = {}
    if fi_ok:
        th = threading.Thread(target=lambda: build.update(flashinfer_backend.warm_build("cuda")), daemon=True)
        th.start()
    if args.stage in STAGE_PLANS:
        configs, variants_of, base = STAGE_PLANS[args.stage]
        cfgs, variants = configs(), variants_of(base)
        if args.only_changed:
            cfgs = [c for c in cfgs if launches_differ(c, variants, sm)]
            print(len(cfgs), "shapes whose launches differ", flush=True)
    elif args.stage == "long":
        cfgs, variants = long_configs_changed(sm), long_variants(DEFAULT_TUNE)
        print(len(cfgs), "shapes", flush=True)
    elif args.stage == "filled":    # the kernel the shipped calibration prices, then the current one
        cfgs, variants = filled_configs(), [("default", PROBE_1_3_TUNE), ("probe 1.5", DEFAULT_TUNE)]
    elif args.stage == "pages":
        cfgs = long_configs() + [c for c in sweep_configs() if c not in long_configs()]
        variants = [("default", DEFAULT_TUNE), ("no page blocks", LONG_TILE_TUNE)]
    else:
        cfgs, _ = build_grid(coverage=True)
        cfgs = list(cfgs) + [c for c in sweep_configs() if c not in cfgs]
        from kernels_probe.attention.grid import regimes_grid

        cfgs = cfgs + [c for c in regimes_grid() if c not in cfgs]
        variants = [("default", DEFAULT_TUNE), ("probe-1.3", PROBE_1_3_TUNE)]
        if args.only_changed:
            def launch(c, tune, tokens):
                return decode_launch_splits(c.batch * c.num_kv_heads, tokens, sm, tune)
            cfgs = [c for c in cfgs if any(launch(c, DEFAULT_TUNE, t) != launch(c, PROBE_1_3_TUNE, t)
                                           for t in (c.prefix_tokens + c.suffix_tokens, c.suffix_tokens))]
            print(len(cfgs), "shapes whose launch differs", flush=True)
    if args.skip_timed:
        from decode_ratio_table import read_doc

        held = {json.dumps(r["config"], sort_keys=True) for r in read_doc(args.skip_timed)["rows"]}
        cfgs = [c for c in cfgs if json.dumps(c.as_dict(), sort_keys=True) not in held]
        print(len(cfgs), "shapes not in", args.skip_timed, flush=True)
    rows = []
    for cfg in cfgs:
        if time.perf_counter() - t_start > args.budget_s:
            print("budget reached; shapes left:", len(cfgs) - cfgs.index(cfg), flush=True)
            break
        try:
            d = build_data(cfg, "cuda")
            ref = reference_output(d)
        except Exception as exc:  # out of memory at the largest shapes
            print("SKIP", cfg.label(), type(exc).__name__, str(exc)[:120], flush=True)
            torch.cuda.empty_cache()
            continue
        T = cfg.prefix_tokens + cfg.suffix_tokens
        row = {"config": cfg.as_dict(), "triton": {}, "flashinfer": {}}
        for tname in ("shared_table", "dup_table"):
            table = getattr(d, tname)
            if table is None:
                continue
            timed: dict = {}
            for label, tune in variants:
                if args.stage == "losers" and tname == "dup_table" and label not in DUP_VARIANTS:
                    continue    # the block rules change nothing over private pages
                out = torch.empty_like(d.q)
                try:
                    shared = shared_launch_tokens(cfg, tune) if tname == "shared_table" else 0
                    p = DecodePlan(d.q, d.k_cache, d.v_cache, table, d.seq_lens, T, out, sm_count=sm, tune=tune,
                                   shared_prefix_tokens=shared)
                    key = launch_key(p, tune)
                    if key in timed:        # the same kernels as an earlier variant: its figure
                        row["triton"].setdefault(tname, {})[label] = {**timed[key], "same_as": timed[key]["label"]}
                        continue
                    err = checked_err(p, out, ref)
                    if not err < TOL:
                        print("WRONG", cfg.label(), tname, label, err, flush=True)
                        continue
                    res = time_as_probe(p, flusher)
                    # again after the graph's replays: a launch that keeps state (the fused merge's counts) must
                    # leave it as it found it, or later replays skip work and time too fast
                    err_after = checked_err(p, out, ref)
                    if not err_after < TOL:
                        print("WRONG after timing", cfg.label(), tname, label, err_after, flush=True)
                        continue
                    row["triton"].setdefault(tname, {})[label] = {"median_s": res["median_s"], "err": err,
                                                                  "err_after_timing": err_after,
                                                                  "splits": p.splits, "launch": p.launch_record()}
                    timed[key] = {**row["triton"][tname][label], "label": label}
                except Exception as exc:
                    print("FAIL", cfg.label(), tname, label, type(exc).__name__, str(exc)[:160], flush=True)
        cascade_variants = variants[:2] if args.stage in ("grid", "prefetch") else []
        if (args.stage in SUFFIX_CASCADE_STAGES and cfg.suffix_tokens
                and len({plan_keys(cfg, t, sm)[2] for _, t in variants}) > 1):
            cascade_variants = variants     # the cascade where its suffix pass's launch differs between tunes
        if cascade_variants:  # the cascade, whose passes the tune also sets
            for label, tune in cascade_variants:
                out = torch.empty_like(d.q)
                try:
                    casc = CascadePlan(d.q, d.k_cache, d.v_cache, [(d.prefix_table, cfg.prefix_tokens,
                                                                    cfg.group_size, cfg.n_groups)],
                                       d.suffix_table, d.suffix_lens, cfg.suffix_tokens, out, sm_count=sm, tune=tune)
                    err = checked_err(casc, out, ref)
                    if err < TOL:
                        row["triton"].setdefault("cascade", {})[label] = {"median_s": time_as_probe(casc, flusher)[
                            "median_s"], "err": err}
                    else:
                        print("WRONG cascade", cfg.label(), label, err, flush=True)
                except Exception as exc:
                    print("FAIL cascade", cfg.label(), label, type(exc).__name__, str(exc)[:160], flush=True)
        if fi_ok:
            th.join()
            for tname in ("shared_table", "dup_table"):
                if getattr(d, tname) is None:
                    continue
                for tc in (False, True):
                    try:
                        fd = flashinfer_backend.FlashInferDecode(d, shared=tname == "shared_table", tensor_cores=tc)
                        err = checked_err(fd, fd.out, ref)
                        if not err < TOL:
                            continue
                        res = time_as_probe(fd, flusher)
                        row["flashinfer"].setdefault(tname, {})["tc" if tc else "cc"] = res["median_s"]
                    except Exception as exc:
                        print("FI FAIL", cfg.label(), tname, tc, type(exc).__name__, str(exc)[:160], flush=True)
        rows.append(row)
        if args.out:    # after every shape: a stage its call's limit stops keeps what it timed
            write_rows(args.out, build, rows, sm)
        line = [cfg.label()]
        for tname in ("shared_table", "dup_table"):
            fi = row["flashinfer"].get(tname)
            tr = row["triton"].get(tname)
            if tr and not fi:       # ours alone (--no-flashinfer): each variant's time
                line.append(f"{tname[:3]}: " + " ".join(f"{k} {v['median_s'] * 1e6:.1f}us" for k, v in tr.items()))
            if not fi or not tr:
                continue
            best_fi = min(fi.values())
            best = min(tr.items(), key=lambda kv: kv[1]["median_s"])
            line.append(f"{tname[:3]}: fi {best_fi * 1e6:.1f}us default x{best_fi / tr['default']['median_s']:.2f} "
                        f"best x{best_fi / best[1]['median_s']:.2f} [{best[0]}]")
            if len(variants) > 1:      # each variant's ratio
                line.append(" ".join(f"{k}:{v['splits']}/x{best_fi / v['median_s']:.2f}" for k, v in tr.items()))
        print(" | ".join(line), flush=True)
        del d, ref
        torch.cuda.empty_cache()
    if args.out:
        write_rows(args.out, build, rows, sm)
    summarize(rows, [v[0] for v in variants])
    return 0


def conditions(args) -> int:
    """Our decode (default tune) and FlashInfer's best decode over shared pages, each timed as the probe times a row
    (time_fn: ~20 ms of flushed replays) right after GPU-heavy work (the float32 reference, as the probe's correctness
    pass precedes its timings), after a 0.5 s idle gap, and back to back for 0.5 s (time_sustained), alternating
    between the two kernels: whether a row's figure depends on what ran before it."""
    import torch

    from cascade_plan.own_kernel_tune import DEFAULT_TUNE
    from kernels_probe.attention import flashinfer_backend
    from kernels_probe.attention.data import build_data, reference_output
    from kernels_probe.attention.reference import max_rel_err
    from kernels_probe.attention.triton_backend import shared_launch_tokens
    from kernels_probe.attention.triton_plans import DecodePlan
    from kernels_probe.timing import time_fn, time_sustained

    sm, flusher, why = gpu_with_flashinfer()
    if why:
        print("FlashInfer unavailable:", why)
        return 1
    rows = []
    t_start = time.perf_counter()
    for cfg in loser_configs()[:10]:
        if time.perf_counter() - t_start > args.budget_s:
            break
        d = build_data(cfg, "cuda")
        ref = reference_output(d)
        out = torch.empty_like(d.q)
        ours = DecodePlan(d.q, d.k_cache, d.v_cache, d.shared_table, d.seq_lens, cfg.prefix_tokens + cfg.suffix_tokens,
                          out, sm_count=sm, tune=DEFAULT_TUNE,
                          shared_prefix_tokens=shared_launch_tokens(cfg, DEFAULT_TUNE))
        ours()
        torch.cuda.synchronize()
        fis = {tc: flashinfer_backend.FlashInferDecode(d, shared=True, tensor_cores=tc) for tc in (False, True)}
        errs = {"triton": max_rel_err(out, ref)}
        for tc, f in fis.items():
            errs["fi_tc" if tc else "fi_cc"] = max_rel_err(f(), ref)
        if not all(e < TOL for e in errs.values()):
            print("WRONG", cfg.label(), errs, flush=True)
            continue
        theirs = min(fis.values(), key=lambda f: time_fn(f, flusher)["median_s"])
        kernels = {"triton": ours, "flashinfer": theirs}
        row = {"config": cfg.as_dict(), "launch": ours.launch_record(), "times": {}}
        for cond in ("after heavy", "after idle", "back to back", "after heavy"):
            for name, fn in kernels.items():
                if cond == "after heavy":
                    reference_output(d)
                    torch.cuda.synchronize()
                    t = time_fn(fn, flusher)["median_s"]
                elif cond == "after idle":
                    torch.cuda.synchronize()
                    time.sleep(0.5)
                    t = time_fn(fn, flusher)["median_s"]
                else:
                    t = time_sustained(fn, flusher, 0.5)["median_s"]
                row["times"].setdefault(cond, {}).setdefault(name, []).append(t)
        rows.append(row)
        print(cfg.label(), " | ".join(
            f"{c}: ours {min(v['triton']) * 1e6:.1f} fi {min(v['flashinfer']) * 1e6:.1f} "
            f"x{min(v['flashinfer']) / min(v['triton']):.2f} (ours spread {max(v['triton']) / min(v['triton']):.3f})"
            for c, v in row["times"].items()), flush=True)
        del d, ref, kernels, fis, ours
        torch.cuda.empty_cache()
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"rows": rows, "sm_count": sm}, f)
    print("\nFlashInfer's best decode / ours per timing condition (>= 1.0: ours at least as fast)")
    for cond in ("after heavy", "after idle", "back to back"):
        r = [min(x["times"][cond]["flashinfer"]) / min(x["times"][cond]["triton"]) for x in rows]
        if r:
            print(f"{cond:14s} n={len(r)} median {statistics.median(r):.3f} worst {min(r):.3f} "
                  f"< 1.0: {sum(v < 1.0 for v in r)}")
    return 0


def summarize(rows, labels):
    """Per variant: the median and worst ratio (FlashInfer / ours) over the rows both timed, and its speed-up over
    the default (decode over either page layout, cascade); with an old probe's tune, the default's over it too."""
    print("\nratio = FlashInfer's best decode / ours (>= 1.0: ours at least as fast)")
    print(f"{'variant':28s} {'table':6s} {'n':>4s} {'median':>7s} {'worst':>7s} {'< 1.0':>6s}")
    for label in labels:
        for tname in ("shared_table", "dup_table"):
            r = []
            for row in rows:
                fi = row["flashinfer"].get(tname)
                tr = row["triton"].get(tname, {}).get(label)
                if fi and tr:
                    r.append(min(fi.values()) / tr["median_s"])
            if r:
                print(f"{label:28s} {tname[:6]:6s} {len(r):4d} {statistics.median(r):7.3f} {min(r):7.3f} "
                      f"{sum(x < 1.0 for x in r):6d}")
    for label in labels:    # every other variant against the default, ours alone (no FlashInfer needed)
        if label == "default":
            continue
        for kind in ("shared_table", "dup_table", "cascade"):
            pairs = [(row["triton"][kind]["default"]["median_s"] / row["triton"][kind][label]["median_s"],
                      "same_as" not in row["triton"][kind][label])
                     for row in rows if {"default", label} <= set(row["triton"].get(kind, {}))]
            r = [x for x, _ in pairs]
            if r:
                print(f"{label} over the default, {kind}: n={len(r)} median {statistics.median(r):.3f}x, "
                      f"min {min(r):.3f}x, max {max(r):.3f}x")
            # the rows the variant launches otherwise: the others read 1.000x and pull the median above to it
            changed = [x for x, own in pairs if own]
            if changed and len(changed) < len(r):
                print(f"{label} over the default where it launches otherwise, {kind}: n={len(changed)} median "
                      f"{statistics.median(changed):.3f}x, min {min(changed):.3f}x, max {max(changed):.3f}x")
    old = next((x for x in ("probe 1.8.0", "probe-1.3", "probe 1.5.5", "probe 1.6.0", "probe 1.7.2") if x in labels),
               None)
    if old:
        for kind in ("shared_table", "dup_table", "cascade"):
            r = [row["triton"][kind][old]["median_s"] / row["triton"][kind]["default"]["median_s"]
                 for row in rows if {"default", old} <= set(row["triton"].get(kind, {}))]
            if r:
                print(f"speed-up of the default over {old}'s tune, {kind}: n={len(r)} median "
                      f"{statistics.median(r):.3f}x, min {min(r):.3f}x, max {max(r):.3f}x")
        worst = []
        for row in rows:
            for tname in ("shared_table", "dup_table"):
                fi = row["flashinfer"].get(tname)
                tr = row["triton"].get(tname, {}).get("default")
                if fi and tr:
                    worst.append((min(fi.values()) / tr["median_s"], tname[:3], row["config"]))
        worst.sort(key=lambda w: w[0])
        print("\nthe 12 rows furthest from FlashInfer (default tune):")
        for ratio, t, c in worst[:12]:
            print(f"  x{ratio:.2f} {t} P={c['prefix_tokens']} n={c['group_size']}x{c['n_groups']} "
                  f"S={c['suffix_tokens']} G={c['q_per_kv']} Hkv={c['num_kv_heads']} {c['kv_dtype']}")


if __name__ == "__main__":
    raise SystemExit(main())
