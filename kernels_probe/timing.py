"""Timing on a CUDA GPU: CUDA-graph replays between CUDA events, L2 flushed (by reading) between
repetitions outside the timed events, warm-up, median of many; and the ceilings.

Per repetition: ``flush(); start.record(); graph.replay(); end.record()``. The flush is a read of a
buffer of several times the L2 (leaving clean lines, so the timed kernel pays no write-backs) that
runs for tens of microseconds on the GPU, long enough for the host to enqueue the event and the
replay behind it, so host launch cost is not timed; the first kernel's in-graph launch latency is.
A ``torch.cuda._sleep`` before the loop gives the host a head start.
"""

from __future__ import annotations

import statistics
import time

import torch
import triton
import triton.language as tl


@triton.jit
def _read_kernel(x_ptr, out_ptr, n_elems, BLOCK: tl.constexpr, ITERS: tl.constexpr, EVICT: tl.constexpr):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    acc = tl.zeros([BLOCK], tl.float32)
    offs = tl.arange(0, BLOCK)
    for i in range(ITERS):
        idx = (i * nprog + pid).to(tl.int64) * BLOCK + offs
        x = tl.load(x_ptr + idx, mask=idx < n_elems, other=0.0, eviction_policy=EVICT)
        acc += x.to(tl.float32)
    tl.store(out_ptr + pid, tl.sum(acc, 0))


@triton.jit
def _copy_kernel(x_ptr, y_ptr, n_elems, BLOCK: tl.constexpr, ITERS: tl.constexpr):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    offs = tl.arange(0, BLOCK)
    for i in range(ITERS):
        idx = (i * nprog + pid).to(tl.int64) * BLOCK + offs
        m = idx < n_elems
        tl.store(y_ptr + idx, tl.load(x_ptr + idx, mask=m, eviction_policy="evict_first"), mask=m)


@triton.jit
def _empty_kernel(x_ptr):
    pass


class L2Flusher:
    """Evicts L2 by reading a buffer of max(4 x L2, 256 MiB)."""

    def __init__(self, l2_bytes: int, device="cuda"):
        n_bytes = max(4 * int(l2_bytes or 0), 256 << 20)
        self.buf = torch.ones(n_bytes // 4, dtype=torch.float32, device=device)
        self.sm_count = torch.cuda.get_device_properties(device).multi_processor_count
        self.nprog = self.sm_count * 8
        self.block = 4096
        self.iters = -(-self.buf.numel() // (self.nprog * self.block))
        self.out = torch.empty(self.nprog, dtype=torch.float32, device=device)

    def __call__(self):
        _read_kernel[(self.nprog,)](self.buf, self.out, self.buf.numel(), BLOCK=self.block, ITERS=self.iters,
                                    EVICT="", num_warps=8)


def start_command(ap, argv, prog: str):
    """A probe command's start: its arguments parsed, the clock its budget counts from started, and the CUDA device
    it times on with its properties and an L2 flusher sized to its L2 (50 MiB where torch does not say):
    (args, t_start, device, props, flusher); None, after printing so, where torch sees no CUDA GPU."""
    args = ap.parse_args(argv)
    t_start = time.perf_counter()
    if not torch.cuda.is_available():
        print(f"{prog}: no CUDA GPU")
        return None
    device = torch.device("cuda")
    props = torch.cuda.get_device_properties(device)
    return args, t_start, device, props, L2Flusher(getattr(props, "L2_cache_size", 50 << 20), device)


def capture_graph(fn, warmup: int = 2) -> torch.cuda.CUDAGraph:
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, capture_error_mode="thread_local"):
        fn()
    torch.cuda.synchronize()
    return g


def time_graph(g: torch.cuda.CUDAGraph, flusher: L2Flusher | None, n_reps: int, warmup: int = 3) -> list[float]:
    """Seconds per replay of g, L2 flushed before each (outside the events)."""
    for _ in range(warmup):
        if flusher is not None:
            flusher()
        g.replay()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n_reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n_reps)]
    torch.cuda._sleep(2_000_000)  # ~1 ms head start for the host
    for i in range(n_reps):
        if flusher is not None:
            flusher()
        starts[i].record()
        g.replay()
        ends[i].record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) * 1e-3 for s, e in zip(starts, ends)]


def summarize(times: list[float]) -> dict:
    ts = sorted(times)
    n = len(ts)

    def pct(p):
        return ts[min(n - 1, max(0, int(round(p * (n - 1)))))]

    return {"median_s": statistics.median(ts), "p10_s": pct(0.10), "p90_s": pct(0.90), "n_reps": n}


def reps_for(estimate_s: float, *, budget_s: float = 0.02, lo: int = 10, hi: int = 100) -> int:
    """How many repetitions to spend about budget_s of GPU time (flush included, ~50 us each)."""
    per = max(estimate_s, 1e-6) + 60e-6
    return int(max(lo, min(hi, budget_s / per)))


def time_fn(fn, flusher, *, budget_s: float = 0.02, lo: int = 10, hi: int = 100) -> dict:
    g = capture_graph(fn)
    est = min(time_graph(g, flusher, 3, warmup=1))
    res = summarize(time_graph(g, flusher, reps_for(est, budget_s=budget_s, lo=lo, hi=hi)))
    del g
    return res


# FlashInfer's FA3 cascade runs 9-13% slower back to back than one burst after an idle gap, at long suffixes (the
# SM clock comes down under sustained load, reason "SW power cap"); a step runs it back to back in every layer.
# Its rows are timed sustained: flushed replays for SUSTAIN_S, the last half summarised. Other kernels measured
# the same both ways (0.95-1.01x, benchmarks/raw/h200-2026-12-01c), so they keep the shorter method.
SUSTAIN_S = 0.8
SUSTAINED = "sustained"          # a row's `timing` where it was timed so


def time_sustained(fn, flusher, seconds: float = SUSTAIN_S) -> dict:
    """summarize() of the last half of `seconds` of flushed back-to-back replays of fn's graph."""
    g = capture_graph(fn)
    times: list[float] = []
    t_end = time.perf_counter() + seconds
    while time.perf_counter() < t_end:    # batches of 20 enqueued back to back: the GPU never waits for the host
        evs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(20)]
        for s, e in evs:
            flusher()
            s.record()
            g.replay()
            e.record()
        torch.cuda.synchronize()
        times += [s.elapsed_time(e) * 1e-3 for s, e in evs]
    del g
    return summarize(times[len(times) // 2:])


# ------------------------------------------------------------------------------------------ ceilings


def measure_ceilings(flusher: L2Flusher, *, quick: bool = False) -> tuple[dict, dict]:
    """(ceilings, details): HBM read and copy bandwidth, bf16 matmul rate, in-graph kernel launch cost."""
    dev = torch.device("cuda")
    details: dict = {}
    props = torch.cuda.get_device_properties(dev)
    sm = props.multi_processor_count

    # HBM read: our streaming read kernel over 4 GiB (2 GiB quick), best of a few launch shapes.
    n_bytes = (2 << 30) if quick else (4 << 30)
    x = torch.randn(n_bytes // 2, dtype=torch.bfloat16, device=dev)
    best = 0.0
    for mult, block, warps in ((4, 4096, 8), (8, 4096, 8), (16, 2048, 4), (8, 8192, 8), (2, 16384, 16)):
        nprog = sm * mult
        iters = -(-x.numel() // (nprog * block))
        out = torch.empty(nprog, dtype=torch.float32, device=dev)
        r = time_fn(lambda: _read_kernel[(nprog,)](x, out, x.numel(), BLOCK=block, ITERS=iters,
                                                         EVICT="evict_first", num_warps=warps),
                    flusher, budget_s=0.05, lo=5, hi=20)
        bw = n_bytes / r["median_s"]
        details[f"read_kernel_{mult}x{block}w{warps}_bytes_per_s"] = bw
        best = max(best, bw)
    r = time_fn(lambda: x.sum(dtype=torch.float32), flusher, budget_s=0.05, lo=5, hi=20)
    details["torch_sum_bytes_per_s"] = n_bytes / r["median_s"]
    best = max(best, details["torch_sum_bytes_per_s"])
    hbm_read = best

    # HBM copy: device-to-device copy_, counting bytes read + written.
    y = torch.empty_like(x)
    r = time_fn(lambda: y.copy_(x), flusher, budget_s=0.05, lo=5, hi=20)
    details["torch_copy_bytes_per_s"] = 2 * n_bytes / r["median_s"]
    nprog = sm * 8
    iters = -(-x.numel() // (nprog * 4096))
    r = time_fn(lambda: _copy_kernel[(nprog,)](x, y, x.numel(), BLOCK=4096, ITERS=iters, num_warps=8), flusher,
                budget_s=0.05, lo=5, hi=20)
    details["copy_kernel_bytes_per_s"] = 2 * n_bytes / r["median_s"]
    hbm_copy = max(details["torch_copy_bytes_per_s"], details["copy_kernel_bytes_per_s"])
    x = y = None   # frees both buffers (a `del` reads to pyflakes as undefined names in the lambdas above)

    # bf16 matmul on random data.
    n = 8192
    a = torch.randn(n, n, dtype=torch.bfloat16, device=dev)
    b = torch.randn(n, n, dtype=torch.bfloat16, device=dev)
    c = torch.empty(n, n, dtype=torch.bfloat16, device=dev)
    r = time_fn(lambda: torch.matmul(a, b, out=c), None, budget_s=0.05, lo=5, hi=20)
    mm = 2 * n**3 / r["median_s"]
    details["matmul_shape"] = [n, n, n]
    a = b = c = None   # frees the operands (as above)

    # launch: marginal cost of one more (empty) kernel in a graph, and one tiny kernel's graph time as timed.
    dummy = torch.empty(1, device=dev)

    def k_n(count):
        def f():
            for _ in range(count):
                _empty_kernel[(1,)](dummy)
        return f

    t1 = time_fn(k_n(1), flusher, budget_s=0.01, lo=20, hi=50)["median_s"]
    t101 = time_fn(k_n(101), flusher, budget_s=0.01, lo=20, hi=50)["median_s"]
    launch = max((t101 - t1) / 100, 1e-9)
    details["graph_one_empty_kernel_s"] = t1
    details["graph_101_empty_kernels_s"] = t101
    torch.cuda.empty_cache()
    ceilings = {
        "hbm_read_bytes_per_s": hbm_read,
        "hbm_copy_bytes_per_s": hbm_copy,
        "bf16_matmul_flop_per_s": mm,
        "graph_kernel_launch_s": launch,
        "graph_single_kernel_s": t1,
    }
    return ceilings, details
