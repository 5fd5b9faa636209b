"""Stages of benchmarks/decode_vs_flashinfer.py that timed the per-sequence decode's launch rules of probes 1.5-1.11
(split-K targets, tiles, waves, page prefetch, fused merges, the streaming launch, prefix and head splits, the wide
dot's first rule): each gives its configurations and its variants of a base tune, as STAGE_PLANS reads them."""

from __future__ import annotations

import dataclasses


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


def wide_dot_variants(base):
    """No blocks where one sequence's 9-16 query heads fill the 16-row dot (probe 1.9.0), and blocks of two
    sequences in a 32-row dot there on 128-token tiles (the default since probe 1.10.0: wide_dot_block_n) and on
    every tile. On an H100 the regimes grid's 12 query heads per KV head had read 0.75-0.98x FlashInfer's decode over
    shared pages without blocks (benchmarks/raw/device-2026-12-06g/regimes-decode.json). The stage's first run
    (wide-dot.json) called probe 1.9.0's launch "default" and blocks on every tile "wide dot"."""
    from cascade_plan.own_kernel_tunes import PROBE_1_9_0_TUNE

    return [("probe 1.9.0", PROBE_1_9_0_TUNE), ("default", base),
            ("wide dot, every tile", dataclasses.replace(base, wide_dot_block_n=1))]


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
