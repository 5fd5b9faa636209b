"""Benchmark: the routing simulation over 10^6 requests (target: under 10 s for all four
policies). Prints the time per policy and in total; asserts nothing.

    python benchmarks/route_1m.py [--requests 1000000] [--replicas 8] [--samples 16]
"""

from __future__ import annotations

import argparse
import time

from cascade_plan.serving.routing import POLICIES, make_stream, route


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--replicas", type=int, default=8)
    ap.add_argument("--samples", type=int, default=16)
    a = ap.parse_args()
    t0 = time.perf_counter()
    stream = make_stream(a.requests, a.samples, rate_per_s=a.replicas * 64, duration_s=1.0, duration_cv=0.5)
    print(f"stream of {a.requests:,} requests: {time.perf_counter() - t0:.2f} s")
    for p in POLICIES:
        t = time.perf_counter()
        r = route(stream, a.replicas, p)
        print(f"{p:>13}: {time.perf_counter() - t:5.2f} s  siblings beside a request {r.siblings_mean:5.2f}, "
              f"busiest/mean load {r.load_imbalance:.2f}")
    print(f"total: {time.perf_counter() - t0:.2f} s (target < 10 s)")


if __name__ == "__main__":
    main()
