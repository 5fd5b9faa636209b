"""What each kind of step work draws from the GPU's power budget, and how much slower it runs once the power
limit holds its clocks down (GPU; the data a power-limited step model would be calibrated on).

``in_step_attention.py`` found the two held-out misses left to be the power limit, not the kernels: FlashInfer's
FA3 cascade runs 12% slower back to back than alone at 690 W (SM clock down to 1,230 MHz, reason "SW power cap"),
and Qwen2.5-14B's cascade step at 512 sequences, GEMM-bound, drops to 1,755-1,920 MHz where its per-sequence twin
(memory-bound attention between the GEMMs) does not. Per op this measures, on a cool GPU and then sustained:

* ``cool_s``: one replay after ~0.3 s idle (the probe's rows are timed close to this);
* ``sustained_s``: the median replay over the last 40% of ~1.5 s of back-to-back replays;
* ``power_w`` / ``sm_mhz``: nvidia-smi (20 ms samples) over that last 40%; ``capped``: a clock below the maximum
  or a power-cap reason seen there.

Ops: an HBM read; one layer's GEMMs and glue back to back (``LayerGraph``, 8 layers' weights) for Qwen2.5-14B and
Llama-3-8B at M = 16-2048 tokens in bf16 and fp8 weights; the attention kernels of the held-out step points.

    python benchmarks/sustained_power.py --out $OUT/power.json     # ~5 min on an H200, FlashInfer JIT included
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
from kernels_probe.timing import L2Flusher, capture_graph, start_command

LAYER_M = (16, 64, 256, 512, 1024, 2048)
LAYER_MODELS = ("qwen2.5-14b", "llama-3-8b")
ATTENTION = (
    ("qwen3-final", WorkloadStep("moe-qwen3-16x32", "qwen3-30b-a3b", "final", 2048, 16, 32, 0, 512, 512),
     (("flashinfer", "cascade"), ("flashinfer", "per_sequence"), ("flashinfer-fa2", "cascade"), ("triton", "cascade"))),
    ("qwen3-first", WorkloadStep("moe-qwen3-16x32", "qwen3-30b-a3b", "first", 2048, 16, 32, 0, 1, 512),
     (("flashinfer", "cascade"), ("triton", "cascade"))),
    ("qwen14-first-fp8", WorkloadStep("heldout-g5-512-fp8kv", "qwen2.5-14b", "first", 4096, 64, 8, 0, 1, 256,
                                      kv_dtype="fp8"), (("triton", "cascade"), ("triton", "per_sequence"))),
    ("llama8b-middle", WorkloadStep("rl-rollouts-64", "llama-3-8b", "middle", 4096, 64, 2, 0, 512, 1024),
     (("triton", "cascade"), ("triton", "per_sequence"))),
)
# whole dense steps (torch glue: no FlashInfer build) with Triton attention per-sequence, cascade, or none at all
STEPS = (
    ("qwen14-first-fp8", WorkloadStep("heldout-g5-512-fp8kv", "qwen2.5-14b", "first", 4096, 64, 8, 0, 1, 256,
                                      kv_dtype="fp8")),
    ("llama8b-middle", WorkloadStep("rl-rollouts-64", "llama-3-8b", "middle", 4096, 64, 2, 0, 512, 1024)),
)
SUSTAIN_S = 1.5
TAIL = 0.4


class Smi:
    """nvidia-smi sampling every 20 ms into a file, read back by wall-clock span."""

    def __init__(self, path: str):
        self.path = path
        for power in ("power.draw.instant", "power.draw"):   # the instant reading where the driver has it
            self.proc = subprocess.Popen(
                ["nvidia-smi", f"--query-gpu=timestamp,clocks.sm,{power},clocks_event_reasons.active",
                 "--format=csv,noheader,nounits", "-lms", "20"], stdout=open(path, "w"), stderr=subprocess.DEVNULL)
            time.sleep(0.5)
            if self.proc.poll() is None:
                self.power_field = power
                return
        raise RuntimeError("nvidia-smi does not answer the query")

    def samples(self, t0: float, t1: float) -> list[tuple[float, float, float, str]]:
        out = []
        for line in open(self.path):
            p = [x.strip() for x in line.split(",")]
            try:
                t = datetime.strptime(p[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
                if t0 <= t <= t1:
                    out.append((t, float(p[1]), float(p[2]), p[3]))
            except (ValueError, IndexError):
                continue
        return out

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


def sustained(fn, smi: Smi, max_mhz: float, *, min_replay_s: float = 5e-3) -> dict:
    """Cool and sustained replay times of fn (repeated in one graph to at least min_replay_s), with power."""
    g1 = capture_graph(fn)
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    g1.replay()
    e.record()
    torch.cuda.synchronize()
    one = s.elapsed_time(e) * 1e-3
    reps = max(1, int(min_replay_s / max(one, 1e-6)))
    g = capture_graph(lambda: [fn() for _ in range(reps)]) if reps > 1 else g1
    g.replay()
    torch.cuda.synchronize()
    time.sleep(0.3)                      # a cool, idle GPU before the first timed replay
    s.record()
    g.replay()
    e.record()
    torch.cuda.synchronize()
    cool = s.elapsed_time(e) * 1e-3 / reps
    n = max(10, int(SUSTAIN_S / max(cool * reps, 1e-6)))
    evs = [torch.cuda.Event(enable_timing=True) for _ in range(n + 1)]
    t0 = time.time()
    evs[0].record()
    for i in range(n):
        g.replay()
        evs[i + 1].record()
    torch.cuda.synchronize()
    t1 = time.time()
    times = [evs[i].elapsed_time(evs[i + 1]) * 1e-3 / reps for i in range(n)]
    k = max(3, int(TAIL * n))
    tail = smi.samples(t1 - TAIL * (t1 - t0), t1)
    del g, g1
    row = {"cool_s": cool, "sustained_s": statistics.median(times[-k:]), "first_s": times[0], "replays": n,
           "ops_per_replay": reps, "sustain_wall_s": t1 - t0}
    if tail:
        mhz = [x[1] for x in tail]
        row.update(power_w=statistics.median(x[2] for x in tail), sm_mhz=statistics.median(mhz), sm_mhz_min=min(mhz),
                   reasons=sorted({x[3] for x in tail}), n_samples=len(tail))
        row["capped"] = min(mhz) < max_mhz - 1 or any(int(r, 16) & 0x4 for r in row["reasons"])
    return row


def layer_rows(device, smi, max_mhz) -> list[dict]:
    from kernels_probe.steps.layer_graph import LayerGraph

    rows = []
    for model in LAYER_MODELS:
        shape = layer_shape(model, 1)
        for dtype in ("bf16", "fp8"):
            for m in LAYER_M:
                lg = LayerGraph(shape, m, dtype, "torch", device, layers=8)
                gm = shape.gemms()
                flops = 8 * 2 * m * sum(n * k for name, (n, k) in gm.items() if name != "lm_head")
                eb = 1 if dtype == "fp8" else 2
                wbytes = 8 * eb * sum(n * k for name, (n, k) in gm.items() if name != "lm_head")
                r = {"op": "layer_graph", "model": model, "m": m, "weight_dtype": dtype, "layers": 8,
                     "gemm_flops": flops, "weight_bytes": wbytes, **sustained(lg, smi, max_mhz)}
                rows.append(r)
                print(f"  layers {model} {dtype} M={m}: cool {r['cool_s'] * 1e3:.3f} ms, sustained "
                      f"{r['sustained_s'] * 1e3:.3f} ms, {r.get('power_w', 0):.0f} W, "
                      f"{r.get('sm_mhz_min', 0):.0f} MHz min", flush=True)
                del lg
                gc.collect()
                torch.cuda.empty_cache()
    return rows


def attention_rows(device, smi, max_mhz) -> list[dict]:
    from kernels_probe.moe.moe_step_shapes import moe_step_shape
    from kernels_probe.steps.step_model import Attention, StepKV

    rows = []
    for case, pt, pairs in ATTENTION:
        shape = moe_step_shape(pt.model, 1) if pt.model == "qwen3-30b-a3b" else layer_shape(pt.model, 1)
        kv = StepKV(shape, pt, device, seed=1)
        for backend, mode in pairs:
            q = torch.randn((pt.batch, shape.q_heads, shape.head_dim), dtype=torch.bfloat16, device=device)
            try:
                attn = Attention(kv, backend, mode, q)
                L = shape.layers
                r = {"op": "attention", "case": case, "backend": backend, "mode": mode, "variant": attn.variant,
                     "config": pt.as_dict(), "layers": L,
                     **sustained(lambda a=attn, n=L: [a(i) for i in range(n)], smi, max_mhz)}
            except Exception as exc:  # noqa: BLE001 -- a backend this machine lacks is a row that says so
                rows.append({"op": "attention", "case": case, "backend": backend, "mode": mode,
                             "error": f"{type(exc).__name__}: {exc}"[:200]})
                continue
            for k in ("cool_s", "sustained_s", "first_s"):
                r[k] /= L   # per layer
            rows.append(r)
            print(f"  attention {case} {backend} {mode}: cool {r['cool_s'] * 1e6:.1f} us/layer, sustained "
                  f"{r['sustained_s'] * 1e6:.1f}, {r.get('power_w', 0):.0f} W, {r.get('sm_mhz_min', 0):.0f} MHz min",
                  flush=True)
            attn = None
        del kv
        gc.collect()
        torch.cuda.empty_cache()
    return rows


class _NoAttention:
    """A step's attention left out: the layer's query passes through as its output."""

    variant = None

    def __init__(self, q):
        self.q = q

    def __call__(self, layer):
        return self.q


def step_rows(device, flusher, smi, max_mhz) -> list[dict]:
    from kernels_probe.steps.step_model import DecodeStep, StepKV, StepWeights
    from kernels_probe.timing import time_graph

    rows = []
    for case, pt in STEPS:
        shape = layer_shape(pt.model, 1)
        weights = StepWeights(shape, device, weight_dtype=pt.weight_dtype)
        kv = StepKV(shape, pt, device, seed=1)
        for mode in ("per_sequence", "cascade", "none"):
            st = DecodeStep(shape, weights, kv, "triton", "per_sequence" if mode == "none" else mode, glue="torch")
            if mode == "none":
                st.attn = _NoAttention(st.q)
            g = capture_graph(st)
            probe_like = statistics.median(time_graph(g, flusher, 12))   # the probe's method: flushed, 12 replays
            g = None
            r = {"op": "step", "case": case, "mode": mode, "config": pt.as_dict(), "probe_like_s": probe_like,
                 **sustained(st, smi, max_mhz, min_replay_s=0.0)}
            rows.append(r)
            print(f"  step {case} {mode}: probe-like {probe_like * 1e3:.2f} ms, cool {r['cool_s'] * 1e3:.2f}, "
                  f"sustained {r['sustained_s'] * 1e3:.2f}, {r.get('power_w', 0):.0f} W, "
                  f"{r.get('sm_mhz', 0):.0f} MHz median", flush=True)
            st = None
        del weights, kv
        gc.collect()
        torch.cuda.empty_cache()
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--parts", default="idle,read,layers,attention")
    started = start_command(ap, argv, "sustained_power")
    if started is None:
        return 1
    args, _, device, props, flusher = started
    q = subprocess.run(["nvidia-smi", "--query-gpu=clocks.max.sm,power.limit,power.default_limit",
                        "--format=csv,noheader,nounits"], capture_output=True, text=True).stdout.strip().split(",")
    max_mhz, limit_w = float(q[0]), float(q[1])
    smi = Smi(os.path.splitext(args.out)[0] + "-smi.csv")
    doc: dict = {"device": props.name, "max_sm_mhz": max_mhz, "power_limit_w": limit_w, "power_field": smi.power_field,
                 "rows": []}
    parts = args.parts.split(",")
    try:
        if "idle" in parts:
            time.sleep(1.5)
            idle = smi.samples(time.time() - 1.0, time.time())
            doc["idle_power_w"] = statistics.median(x[2] for x in idle) if idle else None
            doc["idle_sm_mhz"] = statistics.median(x[1] for x in idle) if idle else None
            print(f"idle: {doc['idle_power_w']} W at {doc['idle_sm_mhz']} MHz", flush=True)
        if "read" in parts:
            big = L2Flusher(1 << 30, device)      # a 4 GiB streaming read
            r = {"op": "hbm_read", "bytes": big.buf.numel() * 4, **sustained(big, smi, max_mhz)}
            doc["rows"].append(r)
            print(f"  hbm read: {r['bytes'] / r['sustained_s'] / 1e12:.2f} TB/s sustained, {r.get('power_w', 0):.0f} W",
                  flush=True)
            del big
        if "layers" in parts:
            doc["rows"] += layer_rows(device, smi, max_mhz)
        if "attention" in parts:
            doc["rows"] += attention_rows(device, smi, max_mhz)
        if "steps" in parts:
            doc["rows"] += step_rows(device, flusher, smi, max_mhz)
    finally:
        smi.stop()
        with open(args.out + ".tmp", "w") as f:
            json.dump(doc, f, indent=1)
        os.replace(args.out + ".tmp", args.out)
    print(f"\n{'op':52} {'cool':>9} {'sustained':>9} {'ratio':>6} {'W':>5} {'MHz min':>7} capped")
    for r in doc["rows"]:
        if "error" in r or "power_w" not in r:
            continue
        name = (f"{r['op']} {r.get('model', r.get('case', ''))} {r.get('weight_dtype', r.get('backend', ''))} "
                f"{r.get('m', r.get('mode', ''))}")
        name = f"step {r['case']} {r['mode']}" if r["op"] == "step" else name
        unit = 1e6 if r["op"] == "attention" else 1e3
        print(f"{name:52} {r['cool_s'] * unit:9.2f} {r['sustained_s'] * unit:9.2f} "
              f"{r['sustained_s'] / r['cool_s']:6.3f} {r['power_w']:5.0f} {r['sm_mhz_min']:7.0f} {r['capped']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
