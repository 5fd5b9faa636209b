"""All-reduce and tensor-parallel decode steps on several GPUs of one host (one process per GPU,
torch.distributed with NCCL; NVLink multicast stays off as the environment sets it).

All-reduce: a CUDA graph of R back-to-back all-reduces and one of a single all-reduce are replayed,
ranks aligned by a host barrier before each repetition; the marginal cost (t_R - t_1) / (R - 1) is one
all-reduce as a step sees it (ranks already in lock-step), t_1 the first one with its launch.
TP steps: the model's shard on each rank (heads, intermediate and vocabulary split), two all-reduces
per layer inside the step's graph, timed on rank 0 with the same barrier per repetition. What runs at
each GPU count (all-reduce sizes, the Llama-3-70B GRPO steps at TP 2, 4 and 8, the 8B steps at TP 2) is
step_shapes.multi_gpu_plan.
"""

from __future__ import annotations

import json
import os
import pathlib
import socket
import tempfile
import traceback

REPEATS = 16


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _dist_timer(dist, gloo):
    import torch

    from kernels_probe.timing import capture_graph, reps_for, summarize

    def time_graph_synced(g, flusher, n):
        ts = []
        for _ in range(n):
            torch.cuda.synchronize()
            dist.barrier(group=gloo)
            if flusher is not None:
                flusher()
            else:
                torch.cuda._sleep(100_000)
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            g.replay()
            e.record()
            torch.cuda.synchronize()
            ts.append(s.elapsed_time(e) * 1e-3)
        return ts

    def timer(fn, flusher, *, budget_s=0.05, lo=10, hi=40):
        g = capture_graph(fn)
        # every rank must replay the same number of times (each replay holds collectives): agree on the
        # slowest rank's estimate
        est = torch.tensor([min(time_graph_synced(g, flusher, 3))], dtype=torch.float64)
        dist.all_reduce(est, op=dist.ReduceOp.MAX, group=gloo)
        res = summarize(time_graph_synced(g, flusher, reps_for(float(est[0]), budget_s=budget_s, lo=lo, hi=hi)))
        del g
        return res

    return timer


def _save(out_dir: str, rank: int, result: dict) -> None:
    path = pathlib.Path(out_dir) / f"rank{rank}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, default=str))
    os.replace(tmp, path)


def _worker(rank: int, world: int, port: int, out_dir: str, quick: bool, backends: list, glue: str,
            tp_steps: bool = True):
    import datetime

    import torch
    import torch.distributed as dist

    result = {"step_ops": [], "steps": [], "skipped": []}
    try:
        torch.cuda.set_device(rank)
        dev = torch.device("cuda", rank)
        dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=60), device_id=dev)
        gloo = dist.new_group(backend="gloo")
        from kernels_probe.steps.step_shapes import multi_gpu_plan
        from kernels_probe.timing import L2Flusher

        props = torch.cuda.get_device_properties(dev)
        flusher = L2Flusher(int(getattr(props, "L2_cache_size", 0)) or (50 << 20), dev)
        timer = _dist_timer(dist, gloo)
        plan = next(p for p in multi_gpu_plan(world, quick) if p["world"] == world)
        for nbytes in plan["allreduce_bytes"]:
            x = torch.ones(nbytes // 2, dtype=torch.bfloat16, device=dev)
            dist.all_reduce(x)
            torch.cuda.synchronize()
            ok = bool(torch.all(x == world).item())

            def many(r, x=x):
                def f():
                    for _ in range(r):
                        dist.all_reduce(x)
                return f

            x.fill_(0)
            r1 = timer(many(1), None)
            rr = timer(many(REPEATS), None)
            def marginal(q):   # one all-reduce: (graph of REPEATS at quantile q - graph of one) / (REPEATS - 1)
                return max((rr[q] - r1["median_s"]) / (REPEATS - 1), 1e-9)

            result["step_ops"].append({
                "op": "allreduce", "config": {"gpus": world, "bytes": nbytes, "dtype": "bf16", "backend": "nccl",
                                              "repeats": REPEATS},
                "median_s": marginal("median_s"), "p10_s": marginal("p10_s"), "p90_s": marginal("p90_s"),
                "n_reps": rr["n_reps"],
                "first_median_s": r1["median_s"], "graph_of_repeats": rr, "graph_of_one": r1, "correct": ok})
            del x
        _save(out_dir, rank, result)
        from kernels_probe.steps.whole_steps import measure_steps

        pts = plan["points"] if tp_steps else []
        rows, skipped = measure_steps(flusher, dev, props.multi_processor_count, quick=quick, backends=backends,
                                      glue=glue, tp=world, allreduce=lambda t: dist.all_reduce(t), rank=rank,
                                      points=pts, timer=lambda st, fl, budget_s: timer(st, fl, budget_s=budget_s,
                                                                                       lo=5, hi=20))
        result["steps"] += rows
        result["skipped"] += skipped
        dist.barrier(group=gloo)
    except Exception as exc:
        result["error"] = f"rank {rank}: {type(exc).__name__}: {exc}\n{traceback.format_exc()[-2000:]}"
    _save(out_dir, rank, result)
    try:
        dist.destroy_process_group()
    except Exception:
        pass


def run_multi_gpu(world: int, *, quick: bool, backends: list[str], glue: str, timeout_s: float = 180.0,
                  tp_steps: bool = True) -> dict:
    """Run the workers (one process per GPU) with a hard time limit: a hung collective costs at most
    timeout_s, and what the ranks saved before it is kept. Returns rank 0's rows (and the first error)."""
    import time

    import torch.multiprocessing as mp

    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
    with tempfile.TemporaryDirectory() as d:
        err = None
        ctx = mp.get_context("spawn")
        port = _free_port()
        procs = [ctx.Process(target=_worker, args=(r, world, port, d, quick, list(backends), glue, tp_steps))
                 for r in range(world)]
        for p in procs:
            p.start()
        deadline = time.monotonic() + timeout_s
        for p in procs:
            p.join(max(0.0, deadline - time.monotonic()))
        if any(p.is_alive() for p in procs):
            err = f"multi-GPU run stopped after its {timeout_s:.0f} s limit"
            for p in procs:
                if p.is_alive():
                    p.kill()
                    p.join(5)
        elif any(p.exitcode for p in procs):
            err = f"worker exit codes {[p.exitcode for p in procs]}"
        out: dict = {}
        for r in range(world):
            p = pathlib.Path(d) / f"rank{r}.json"
            if p.exists():
                doc = json.loads(p.read_text())
                if r == 0:
                    out = doc
                if doc.get("error") and not out.get("error"):
                    out["error"] = doc["error"]
        if err and not out.get("error"):
            out["error"] = err
        return out
