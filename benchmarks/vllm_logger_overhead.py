"""The vLLM step logger's cost per decode step at 256 running sequences, on a recorded-style replay
(tests/vllm_replay.py: prefix caching, 32 prompts x 8 samples under a 1,024-token system prompt, each
prompt ~2,100 tokens, decoding ~300 steps with arrivals as requests finish).

    python benchmarks/vllm_logger_overhead.py [--steps 300] [--seqs 256]

Prints CPU µs per step (this thread's CPU time, so other processes on a shared machine do not count)
for the engine-thread part (snapshot + enqueue: all the engine waits for) and the background part
(conversion to a record + JSON encoding), measured separately: median, p90, p99 and max over steps."""

import argparse
import collections
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cascade_plan.logs.vllm_logger import snapshot
from cascade_plan.logs.vllm_scheduler import SchedulerLogWriter
from tests.vllm_replay import BS, FakeEngine, tokens


def record_replay(seqs: int, steps: int):
    e = FakeEngine(seed=1)
    system = tokens(1, 64 * BS)
    n = 0

    def add(k):
        nonlocal n
        for _ in range(k):
            p = n // 8
            e.add(f"r{n}", system + tokens(1000 + p, 1000 + p % 7) + tokens(5000 + p, 60), target=200 + (n * 37) % 300)
            n += 1

    add(seqs)
    out = []
    for _ in range(steps):
        running = len(e.running) + len(e.waiting)
        if running < seqs:
            add(seqs - running)
        so, _ = e.step(truth=False)
        out.append(so)
    return out


def sglang_batch(seqs: int):
    """A decode batch shaped like SGLang's: 32 prompts x 8 samples under one system prompt, each request's
    last_node three radix nodes below the root (system, document, question)."""
    class Node:
        def __init__(self, parent, n, i):
            self.parent, self.key, self.id = parent, range(n), i

    class Mode:
        def is_decode(self):
            return True

    class Req:
        def __init__(self, rid, n, node):
            self.rid, self.origin_input_ids, self.output_ids, self.last_node = rid, range(n), [1] * 50, node

    class Batch:
        pass

    root = Node(None, 0, 0)
    system = Node(root, 1024, 1)
    b = Batch()
    b.forward_mode, b.reqs = Mode(), []
    q = None
    for i in range(seqs):
        p = i // 8
        if i % 8 == 0:
            q = Node(Node(system, 1000, 10 + p), 60, 1000 + p)
        b.reqs.append(Req(f"r{i}", 2084, q))
    return b


def sglang_overhead(seqs: int, steps: int):
    from cascade_plan.logs.sglang_adapter import SglangBatchWriter, snapshot_batch

    b, w = sglang_batch(seqs), SglangBatchWriter()
    hot, bg = [], []
    for _ in range(steps):
        t = time.thread_time()
        snap = snapshot_batch(b)
        hot.append(time.thread_time() - t)
        t = time.thread_time()
        w.encode(w.write(snap))
        bg.append(time.thread_time() - t)
    return hot, bg


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--seqs", type=int, default=256)
    a = ap.parse_args()
    t0 = time.perf_counter()
    replay = record_replay(a.seqs, a.steps + 5)
    print(f"recorded {len(replay)} steps in {time.perf_counter() - t0:.1f} s")
    warm, replay = replay[:5], replay[5:]
    q = collections.deque()
    w = SchedulerLogWriter(None, replica="r0", block_size=BS)
    for so in warm:
        w.write(snapshot(so))
    hot = []
    for so in replay:
        t = time.thread_time()
        q.append(snapshot(so))
        hot.append(time.thread_time() - t)
    bg, nbytes, batch = [], 0, []
    while q:
        snap = q.popleft()
        t = time.thread_time()
        rec = w.write(snap)
        line = w.encode(rec) if rec else b""
        bg.append(time.thread_time() - t)
        nbytes += len(line)
        batch.append(len(rec["seqs"]) if rec else 0)
    def q(xs, p):
        return sorted(xs)[round(p * (len(xs) - 1))] * 1e6

    def line(xs):
        return (f"median {q(xs, .5):.0f}, p90 {q(xs, .9):.0f}, p99 {q(xs, .99):.0f}, max {q(xs, 1):.0f} us/step "
                f"(mean {sum(xs) / len(xs) * 1e6:.0f})")

    arrivals = sum(len(so.scheduled_new_reqs) for so in replay) / len(replay)
    print(f"decoding sequences per step: median {sorted(batch)[len(batch) // 2]}, min {min(batch)}; "
          f"{arrivals:.2f} arrivals per step")
    print(f"engine thread (snapshot + enqueue): {line(hot)}")
    print(f"logger thread (convert + encode):   {line(bg)}")
    print(f"log volume: {nbytes / len(bg) / 1e3:.1f} kB/step")
    m = sum(hot) / len(hot) * 1e6
    print(f"the engine-thread part is 1% of a decode step of {m * 100 / 1e3:.1f} ms or more")
    hot, bg = sglang_overhead(a.seqs, a.steps)
    print(f"SGLang, {a.seqs} requests on 3-node radix paths: scheduler thread {line(hot)}")
    print(f"SGLang logger thread: {line(bg)}")


if __name__ == "__main__":
    main()
