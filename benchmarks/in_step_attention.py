"""Is a step's attention slower inside the whole step than its kernels alone, and why? (GPU; a diagnosis.)

The held-out whole steps that miss their targets are cascades priced from kernels timed alone: FlashInfer's FA3
cascade at Qwen3-30B-A3B's final step and the Triton fp8 cascade at Qwen2.5-14B (512 sequences) and at
Mistral-Nemo (32K prefix). For each such step point this times, on the step's own paged caches (one per layer):

* ``alone``: one layer's attention, one graph, L2 flushed before each replay (how the probe's rows are timed);
* ``layers``: every layer's attention back to back in one graph (the step with its GEMMs and glue left out),
  L2 flushed before each replay, per layer;
* ``layers_idle``: the same graph, each replay after ~100 ms of GPU sleep (a cool, idle GPU);
* ``step``: the whole decode step (dense or MoE step model), more repetitions than the probe takes;

and samples the SM clock, power and clock-event reasons with nvidia-smi (20 ms) during each phase, so a
slowdown can be told apart as clocks (power or heat) or as the kernels themselves.

    python benchmarks/in_step_attention.py --out $OUT/in_step.json   # ~5 min on an H200, FlashInfer JIT included
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from datetime import datetime

import torch

from kernels_probe.steps.step_shapes import WorkloadStep, layer_shape
from kernels_probe.timing import capture_graph, start_command, summarize, time_fn, time_graph

# name, step point, step kind ("dense" through the dense step model, "moe" through the MoE one), (backend, mode)s
CASES = (
    ("qwen3-final", WorkloadStep("moe-qwen3-16x32", "qwen3-30b-a3b", "final", 2048, 16, 32, 0, 512, 512), "moe",
     (("flashinfer", "cascade"), ("flashinfer", "per_sequence"), ("flashinfer-fa2", "cascade"), ("triton", "cascade"))),
    ("qwen3-middle", WorkloadStep("moe-qwen3-16x32", "qwen3-30b-a3b", "middle", 2048, 16, 32, 0, 256, 512), "moe",
     (("flashinfer", "cascade"),)),
    ("qwen14-first-fp8", WorkloadStep("heldout-g5-512-fp8kv", "qwen2.5-14b", "first", 4096, 64, 8, 0, 1, 256,
                                      kv_dtype="fp8"), "dense", (("triton", "cascade"), ("triton", "per_sequence"))),
    ("nemo-middle-fp8", WorkloadStep("heldout-32k-fp8", "mistral-nemo-12b", "middle", 32768, 16, 1, 0, 128, 256,
                                     kv_dtype="fp8", weight_dtype="fp8"), "dense",
     (("triton", "cascade"), ("triton", "per_sequence"))),
    ("llama8b-middle", WorkloadStep("rl-rollouts-64", "llama-3-8b", "middle", 4096, 64, 2, 0, 512, 1024), "dense",
     (("triton", "cascade"), ("flashinfer", "cascade"))),
    ("llama8b-first", WorkloadStep("rl-rollouts-64", "llama-3-8b", "first", 4096, 64, 2, 0, 1, 1024), "dense",
     (("flashinfer", "cascade"), ("flashinfer", "per_sequence"))),
    ("llama8b-final", WorkloadStep("rl-rollouts-64", "llama-3-8b", "final", 4096, 64, 2, 0, 1024, 1024), "dense",
     (("flashinfer", "cascade"), ("flashinfer", "per_sequence"), ("flashinfer-fa2", "cascade"))),
)
IDLE_CYCLES = 200_000_000   # torch.cuda._sleep: ~100 ms at the H200's 1.98 GHz


class Phases:
    """Wall-clock spans of named phases, matched to nvidia-smi samples afterwards."""

    def __init__(self):
        self.spans: list[tuple[str, float, float]] = []

    def run(self, name, fn):
        torch.cuda.synchronize()
        t0 = time.time()
        out = fn()
        torch.cuda.synchronize()
        self.spans.append((name, t0, time.time()))
        return out


def _idle_replays(g, n: int) -> list[float]:
    times = []
    for _ in range(n):
        torch.cuda._sleep(IDLE_CYCLES)
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        g.replay()
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e) * 1e-3)
    return times


def attention_only(case, pt, shape, pairs, flusher, phases, device) -> list[dict]:
    from kernels_probe.steps.step_model import Attention, StepKV

    kv = StepKV(shape, pt, device, seed=1)
    rows = []
    for backend, mode in pairs:
        q = torch.randn((pt.batch, shape.q_heads, shape.head_dim), dtype=torch.bfloat16, device=device)
        try:
            attn = Attention(kv, backend, mode, q)
        except Exception as exc:  # noqa: BLE001 -- a backend this machine lacks is a row that says so
            rows.append({"case": case, "backend": backend, "mode": mode, "error": f"{type(exc).__name__}: {exc}"[:200]})
            continue
        L = shape.layers
        key = f"{case}/{backend}/{mode}"
        alone0 = phases.run(f"{key}/alone", lambda a=attn: time_fn(lambda: a(0), flusher, budget_s=0.05, lo=20))
        alone_last = time_fn(lambda a=attn: a(L - 1), flusher, budget_s=0.05, lo=20)
        g = capture_graph(lambda a=attn: [a(i) for i in range(L)])
        layers = phases.run(f"{key}/layers", lambda g=g: summarize(time_graph(g, flusher, 20)))
        idle = phases.run(f"{key}/layers_idle", lambda g=g: summarize(_idle_replays(g, 8)))
        g = None   # frees the graph's pool before the next backend
        row = {"case": case, "backend": backend, "mode": mode, "layers": L, "variant": attn.variant,
               "alone_layer0_s": alone0["median_s"], "alone_last_s": alone_last["median_s"],
               "layers_per_layer_s": layers["median_s"] / L, "layers_p90_per_layer_s": layers["p90_s"] / L,
               "layers_idle_per_layer_s": idle["median_s"] / L}
        rows.append(row)
        print(f"  {key}: alone {row['alone_layer0_s'] * 1e6:.1f} us, in {L} layers "
              f"{row['layers_per_layer_s'] * 1e6:.1f} us/layer, idle-first {row['layers_idle_per_layer_s'] * 1e6:.1f}",
              flush=True)
        attn = None
    del kv
    gc.collect()
    torch.cuda.empty_cache()
    return rows


def whole_steps(case, pt, kind, pairs, flusher, phases, device, sm_count) -> list[dict]:
    def timer(st, fl, budget_s):
        g = capture_graph(st)
        res = summarize(time_graph(g, fl, 12))
        g = None   # frees the graph's pool before the next backend
        return res

    backends = sorted({b for b, _ in pairs})
    if kind == "dense":
        from kernels_probe.steps.whole_steps import measure_steps

        rows, skipped = phases.run(f"{case}/step", lambda: measure_steps(
            flusher, device, sm_count, quick=False, backends=backends, glue="fused", points=[pt], timer=timer))
    else:
        from kernels_probe.moe.moe_step_shapes import MoeStepPoint
        from kernels_probe.moe.moe_steps import measure_moe_steps

        rows, skipped = phases.run(f"{case}/step", lambda: measure_moe_steps(
            flusher, device, sm_count, [MoeStepPoint(pt, 1, None)], modes=pairs, timer=timer))
    out = [{"case": case, "backend": r["backend"], "mode": r["mode"], "step_s": r["median_s"],
            "step_p10_s": r["p10_s"], "step_p90_s": r["p90_s"], "n_reps": r["n_reps"]} for r in rows]
    out += [{"case": case, "step_skipped": s.get("reason")} for s in skipped]
    gc.collect()
    torch.cuda.empty_cache()
    return out


def _smi_stats(path: str, spans) -> dict:
    samples = []
    for line in open(path):
        parts = [p.strip() for p in line.split(",")]
        try:
            t = datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
            samples.append((t, float(parts[1]), float(parts[2]), parts[3]))
        except (ValueError, IndexError):
            continue
    out = {}
    for name, t0, t1 in spans:
        inside = [s for s in samples if t0 <= s[0] <= t1]
        if inside:
            out[name] = {"n": len(inside), "sm_mhz_median": statistics.median(s[1] for s in inside),
                         "sm_mhz_min": min(s[1] for s in inside),
                         "power_w_median": statistics.median(s[2] for s in inside),
                         "reasons": sorted({s[3] for s in inside})}
    return out


def _write(path, rows, smi_path, phases) -> dict:
    clocks = _smi_stats(smi_path, phases.spans)
    with open(path + ".tmp", "w") as f:
        json.dump({"rows": rows, "clocks": clocks, "spans": phases.spans}, f, indent=1)
    os.replace(path + ".tmp", path)
    return clocks


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--cases", default=",".join(c[0] for c in CASES))
    ap.add_argument("--no-steps", action="store_true")
    started = start_command(ap, argv, "in_step_attention")
    if started is None:
        return 1
    args, _, device, props, flusher = started
    smi_path = os.path.splitext(args.out)[0] + "-smi.csv"
    for reasons in ("clocks_event_reasons.active", "clocks_throttle_reasons.active"):   # newer, older drivers
        smi = subprocess.Popen(["nvidia-smi", f"--query-gpu=timestamp,clocks.sm,power.draw,{reasons}",
                                "--format=csv,noheader,nounits", "-lms", "20"], stdout=open(smi_path, "w"),
                               stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        if smi.poll() is None:
            break
    phases = Phases()
    rows: list[dict] = []
    by_name = {c[0]: c for c in CASES}
    try:
        for case, pt, kind, pairs in (by_name[n] for n in args.cases.split(",")):   # in the order asked
            t0 = time.perf_counter()
            if kind == "moe":
                from kernels_probe.moe.moe_step_shapes import moe_step_shape

                shape = moe_step_shape(pt.model, 1)
            else:
                shape = layer_shape(pt.model, 1)
            print(f"{case}: {pt.label()}", flush=True)
            rows += attention_only(case, pt, shape, pairs, flusher, phases, device)
            if not args.no_steps:
                rows += whole_steps(case, pt, kind, pairs, flusher, phases, device, props.multi_processor_count)
            print(f"  {time.perf_counter() - t0:.1f} s", flush=True)
            _write(args.out, rows, smi_path, phases)   # after each case: a run cut short keeps what it measured
    finally:
        time.sleep(0.1)
        smi.terminate()
        smi.wait()
    clocks = _write(args.out, rows, smi_path, phases)
    steps = {(r["case"], r["backend"], r["mode"]): r for r in rows if "step_s" in r}
    print(f"\n{'case / backend / mode':44} {'alone':>8} {'layers':>8} {'idle':>8} {'ratio':>6} {'step ms':>8} "
          f"{'MHz alone/layers':>17} {'W layers':>8}")
    for r in rows:
        if "alone_layer0_s" not in r:
            continue
        key = f"{r['case']}/{r['backend']}/{r['mode']}"
        st = steps.get((r["case"], r["backend"], r["mode"]))
        ca, cl = clocks.get(f"{key}/alone", {}), clocks.get(f"{key}/layers", {})
        print(f"{key:44} {r['alone_layer0_s'] * 1e6:8.1f} {r['layers_per_layer_s'] * 1e6:8.1f} "
              f"{r['layers_idle_per_layer_s'] * 1e6:8.1f} {r['layers_per_layer_s'] / r['alone_layer0_s']:6.3f} "
              f"{st['step_s'] * 1e3 if st else float('nan'):8.2f} "
              f"{ca.get('sm_mhz_median', 0):8.0f}/{cl.get('sm_mhz_min', 0):<8.0f} {cl.get('power_w_median', 0):8.0f}")
    for name, c in clocks.items():
        if name.endswith("/step"):
            print(f"{name:44} SM {c['sm_mhz_median']:.0f} MHz (min {c['sm_mhz_min']:.0f}), "
                  f"{c['power_w_median']:.0f} W, reasons {c['reasons']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
