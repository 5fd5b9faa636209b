"""Re-time the shipped H200 file's FlashInfer cascade rows (backend ``flashinfer``: FA3 on Hopper for 16-bit KV) the
way a step runs them: back to back for about a second, not one burst after an idle gap (GPU).

in_step_attention.py found FA3's cascade 9-12% slower when every layer runs it back to back than when one layer
runs it alone (Qwen3-30B-A3B at 256 and 512 suffix tokens, Llama-3-8B at 1,024), and as fast again after an
idle gap: the SM clock comes down under sustained load (reason: software power cap). Its FA2 levels, the Triton
kernels and the per-sequence decodes do not slow (0.95-1.01x). Per configuration this times, on the probe's own
inputs (build_data, the same seed), the cascade as the probe does (``time_fn``: L2 flushed before each replay,
~20 ms of replays) and then sustained: the same flushed replays for SUSTAIN_S seconds, the median of the last
half. Correctness is checked against the float32 reference first, as the probe does.

    python benchmarks/retime_fa3_sustained.py calibrations/h200-probe-2026-12-01.json --out $OUT/fa3.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import torch

from kernels_probe.attention.grid import AttentionConfig
from kernels_probe.timing import SUSTAIN_S, start_command, time_fn, time_sustained

TOLERANCE = 1e-2


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("calibration")
    ap.add_argument("--out", required=True)
    ap.add_argument("--kv-dtype", default="bf16")
    started = start_command(ap, argv, "retime_fa3_sustained")
    if started is None:
        return 1
    args, _, device, props, flusher = started
    from kernels_probe.attention.data import build_data, reference_output
    from kernels_probe.attention.flashinfer_backend import FlashInferCascade
    from kernels_probe.attention.reference import max_rel_err

    doc = json.load(open(args.calibration))
    rows = [m for m in doc["measurements"] if m["backend"] == "flashinfer" and m["kernel"] == "cascade_total"
            and m.get("variant") == "auto" and m["config"].get("kv_dtype", "bf16") == args.kv_dtype
            and m.get("median_s")]
    out: list[dict] = []
    t0 = time.perf_counter()
    for i, m in enumerate(rows):
        cfg = AttentionConfig(**m["config"])
        rec = {"config": m["config"], "file_median_s": m["median_s"]}
        try:
            data = build_data(cfg, device, seed=0, dup_cap_bytes=0)
            fc = FlashInferCascade(data, fa2=False)
            o = fc().float()
            err = float(max_rel_err(o, reference_output(data)))
            if not err <= TOLERANCE:
                raise RuntimeError(f"correctness: max_rel_err={err:.3g}")
            alone = time_fn(fc, flusher)
            sus = time_sustained(fc, flusher, SUSTAIN_S)
            rec.update(alone_s=alone["median_s"], alone_p10_s=alone["p10_s"], alone_p90_s=alone["p90_s"],
                       sustained_s=sus["median_s"], sustained_p10_s=sus["p10_s"], sustained_p90_s=sus["p90_s"],
                       sustained_replays=2 * sus["n_reps"], max_rel_err=err)
            del fc, data
        except Exception as exc:  # noqa: BLE001 -- a configuration that fails is a row that says why
            rec["error"] = f"{type(exc).__name__}: {exc}"[:300]
        out.append(rec)
        if "sustained_s" in rec:
            print(f"{i + 1}/{len(rows)} {cfg.n_groups}x{cfg.group_size} P={cfg.prefix_tokens} S={cfg.suffix_tokens} "
                  f"G={cfg.q_per_kv} H={cfg.num_kv_heads}: file {m['median_s'] * 1e6:.1f} us, alone "
                  f"{rec['alone_s'] * 1e6:.1f}, sustained {rec['sustained_s'] * 1e6:.1f} "
                  f"({rec['sustained_s'] / rec['alone_s']:.3f}x)", flush=True)
        else:
            print(f"{i + 1}/{len(rows)} {m['config']}: {rec['error']}", flush=True)
        torch.cuda.empty_cache()
        if i % 10 == 9 or i == len(rows) - 1:   # a run cut short keeps what it measured
            with open(args.out + ".tmp", "w") as f:
                json.dump({"device": props.name, "sustain_s": SUSTAIN_S, "rows": out}, f, indent=1)
            os.replace(args.out + ".tmp", args.out)
    ok = [r for r in out if "sustained_s" in r]
    ratios = sorted(r["sustained_s"] / r["alone_s"] for r in ok)
    drift = sorted(r["alone_s"] / r["file_median_s"] for r in ok)
    if ok:
        print(f"\n{len(ok)} of {len(rows)} rows in {time.perf_counter() - t0:.0f} s; sustained / alone: median "
              f"{statistics.median(ratios):.3f}, max {ratios[-1]:.3f}; alone today / file: median "
              f"{statistics.median(drift):.3f} ({drift[0]:.3f}-{drift[-1]:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
