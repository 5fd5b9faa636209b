"""The `conditions` stage of benchmarks/decode_vs_flashinfer.py: whether a row's figure depends on what ran before
it (our decode and FlashInfer's after heavy work, after an idle gap, back to back)."""

from __future__ import annotations

import json
import statistics
import time

from decode_split_stages import loser_configs
from decode_timing import TOL, gpu_with_flashinfer


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
