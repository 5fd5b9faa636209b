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

This script runs a stage; STAGE_PLANS names each stage's shapes and variants, which live beside it: the launch rules
of probes 1.5-1.11 in decode_split_stages.py, of head dim 256 in decode_wide_head_stages.py, of the wide dot and fp8
(1.12-1.15) in decode_wide_stages.py, of later probes in decode_rule_stages.py, kernel-body changes in
decode_body_stages.py; the grids' shape lists in decode_stage_shapes.py, a plan's launch key in
decode_launch_keys.py, checking and timing in decode_timing.py.
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
import decode_launch_keys as launch_keys  # noqa: E402
import decode_rule_stages as rule_stages  # noqa: E402
import decode_split_stages as split_stages  # noqa: E402
import decode_stage_shapes as shapes  # noqa: E402
import decode_stream_stages as stream_stages  # noqa: E402
import decode_wide_head_stages as head_stages  # noqa: E402
import decode_wide_stages as wide_stages  # noqa: E402
from decode_conditions import conditions  # noqa: E402
from decode_timing import TOL, checked_err, time_as_probe  # noqa: E402

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

# stage: (its configurations, its variants of a base tune, the base) for the stages that need nothing else. The
# stages of the rules probe 1.13.0 turned on keep probe 1.12.0's tune as their base ("default" in their files),
# those of the rule probe 1.14.0 turned on probe 1.13.0's, those of probe 1.15.0's rules probe 1.14.0's (or
# 1.15.0's without the rule), and those timed against probe 1.15.0 or 1.16.0 that one's tune: the launch those
# rules were timed against, which the current default leaves behind
STAGE_PLANS = {
    "sweep": (split_stages.sweep_configs, split_stages.sweep_variants, DEFAULT_TUNE),
    "splits": (split_stages.long_configs, split_stages.split_variants, DEFAULT_TUNE),
    "tiny": (split_stages.tiny_configs, split_stages.tiny_variants, DEFAULT_TUNE),
    "losers": (split_stages.loser_configs, split_stages.loser_variants, PROBE_1_5_2_TUNE),
    "tiles": (split_stages.tile_configs, split_stages.tile_variants, DEFAULT_TUNE),
    "waves": (split_stages.wave_configs, split_stages.wave_variants, DEFAULT_TUNE),
    "prefetch": (split_stages.prefetch_configs, split_stages.prefetch_variants, DEFAULT_TUNE),
    "fused": (split_stages.prefetch_configs, split_stages.fused_variants, DEFAULT_TUNE),
    "stream": (split_stages.prefetch_configs, split_stages.stream_variants, DEFAULT_TUNE),
    "rules": (split_stages.prefetch_configs, split_stages.rule_variants, DEFAULT_TUNE),
    "prefix-split": (wide_stages.prefix_split_configs, split_stages.prefix_split_variants, DEFAULT_TUNE),
    "head-split": (shapes.grid_and_regimes_configs, split_stages.head_split_variants, DEFAULT_TUNE),
    "fi-tiles": (split_stages.fi_tile_configs, lambda base: [("default", base)], DEFAULT_TUNE),
    "regimes-decode": (shapes.regimes_configs, lambda base: [("default", base)], DEFAULT_TUNE),
    "coverage-decode": (shapes.coverage_configs, lambda base: [("default", base)], DEFAULT_TUNE),
    "grid-decode": (shapes.default_grid_configs, lambda base: [("default", base)], DEFAULT_TUNE),
    "wide-dot": (shapes.grid_and_regimes_configs, split_stages.wide_dot_variants, DEFAULT_TUNE),
    "head-dim-256": (head_stages.head_dim_256_configs, head_stages.head_dim_256_variants, DEFAULT_TUNE),
    "wide-head": (head_stages.wide_head_configs, head_stages.wide_head_variants, DEFAULT_TUNE),
    "wide-head-waves": (head_stages.wide_head_wave_configs, head_stages.wide_head_wave_variants, DEFAULT_TUNE),
    "regimes-losers": (head_stages.regimes_loser_configs, head_stages.regimes_loser_variants, DEFAULT_TUNE),
    "fp8-pairs": (wide_stages.fp8_configs, wide_stages.fp8_pair_variants, PROBE_1_12_0_TUNE),
    "swap-ab": (wide_stages.swap_ab_configs, wide_stages.swap_ab_variants, DEFAULT_TUNE),
    "fp8-capped": (wide_stages.fp8_capped_configs, wide_stages.fp8_capped_variants, PROBE_1_12_0_TUNE),
    "block-fill": (wide_stages.block_fill_configs, wide_stages.block_fill_variants, PROBE_1_12_0_TUNE),
    "next-rules": (wide_stages.next_rules_configs, wide_stages.next_rules_variants, PROBE_1_12_0_TUNE),
    "wide-head-private": (head_stages.wide_head_private_configs, head_stages.wide_head_private_variants, DEFAULT_TUNE),
    "wide-dot-targets": (wide_stages.wide_dot_target_configs, wide_stages.wide_dot_target_variants, PROBE_1_13_0_TUNE),
    "regimes-next": (shapes.regimes_configs, wide_stages.regimes_next_variants, PROBE_1_13_0_TUNE),
    "wide-dot-long": (wide_stages.wide_dot_long_configs, wide_stages.wide_dot_long_variants, PROBE_1_13_0_TUNE),
    "wide-dot-tails": (wide_stages.wide_dot_tail_configs, wide_stages.wide_dot_tail_variants, PROBE_1_13_0_TUNE),
    "wide-dot-4": (wide_stages.wide_dot_4_configs, wide_stages.wide_dot_4_variants, PROBE_1_14_0_TUNE),
    "wide-head-tiles": (head_stages.wide_head_tile_configs, head_stages.wide_head_tile_variants, PROBE_1_14_0_TUNE),
    "wide-head-short": (head_stages.wide_head_short_configs, head_stages.wide_head_short_variants, PROBE_1_14_0_TUNE),
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
    "stagger": (body_stages.stagger_configs, body_stages.stagger_variants, DEFAULT_TUNE),
    "wide-head-stream": (stream_stages.wide_head_stream_configs, stream_stages.wide_head_stream_variants,
                         DEFAULT_TUNE),
    "probe-1-22": (stream_stages.wide_head_stream_configs, stream_stages.probe_1_22_variants, DEFAULT_TUNE),
    "gluon-route": (body_stages.stagger_configs, body_stages.gluon_variants, DEFAULT_TUNE),
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
            cfgs = [c for c in cfgs if launch_keys.launches_differ(c, variants, sm)]
            print(len(cfgs), "shapes whose launches differ", flush=True)
    elif args.stage == "long":
        cfgs, variants = split_stages.long_configs_changed(sm), split_stages.long_variants(DEFAULT_TUNE)
        print(len(cfgs), "shapes", flush=True)
    elif args.stage == "filled":    # the kernel the shipped calibration prices, then the current one
        cfgs, variants = split_stages.filled_configs(), [("default", PROBE_1_3_TUNE), ("probe 1.5", DEFAULT_TUNE)]
    elif args.stage == "pages":
        long = split_stages.long_configs()
        cfgs = long + [c for c in split_stages.sweep_configs() if c not in long]
        variants = [("default", DEFAULT_TUNE), ("no page blocks", LONG_TILE_TUNE)]
    else:
        cfgs, _ = build_grid(coverage=True)
        cfgs = list(cfgs) + [c for c in split_stages.sweep_configs() if c not in cfgs]
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
                if args.stage == "losers" and tname == "dup_table" and label not in split_stages.DUP_VARIANTS:
                    continue    # the block rules change nothing over private pages
                out = torch.empty_like(d.q)
                try:
                    shared = shared_launch_tokens(cfg, tune) if tname == "shared_table" else 0
                    p = DecodePlan(d.q, d.k_cache, d.v_cache, table, d.seq_lens, T, out, sm_count=sm, tune=tune,
                                   shared_prefix_tokens=shared)
                    key = launch_keys.launch_key(p, tune)
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
                and len({launch_keys.plan_keys(cfg, t, sm)[2] for _, t in variants}) > 1):
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
