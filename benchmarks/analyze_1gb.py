"""Benchmark: `cascade-plan analyze` over 1 GB of uncompressed JSON Lines (per-sequence form).

Targets: under 60 s on a 2-core machine, peak memory under 1.5 GB. Prints the figures;
asserts nothing. The log is generated once with DuckDB (8 replicas, 128 sequences per step in
sibling groups of 32 over 4,096-token prompts, continuous batching: requests at every age):

    python benchmarks/analyze_1gb.py [--size-gb 1.0] [--log /tmp/cascade-plan-bench-1gb.jsonl]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

BYTES_PER_STEP = 8_300   # ~128 sequences x ~65 bytes of JSON each (the size is measured and reported)


def generate(path: Path, size_gb: float) -> None:
    import duckdb

    steps = int(size_gb * 1e9 / BYTES_PER_STEP)
    tmp = path.with_suffix(".tmp")
    duckdb.connect().execute(f"""
        COPY (SELECT round(i * 0.004, 3) AS ts, 'r' || (i % 8) AS replica,
                     list_transform(range(128), lambda j: {{'request': 'q' || (i // 8000) || '-'
                                                                       || ((i % 8) * 128 + j),
                                                           'group': 'p' || (i // 8000) || '-'
                                                                     || ((i % 8) * 4 + j // 32),
                                                           'shared': 4096 - 512 * (j // 32 % 2),
                                                           'private': 1 + (i // 8 + j * 7) % 1024}}) AS seqs
              FROM range({steps}) t(i))
        TO '{tmp}' (FORMAT json)""")
    os.replace(tmp, path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-gb", type=float, default=1.0)
    ap.add_argument("--log", type=Path, default=Path("/tmp/cascade-plan-bench-1gb.jsonl"))
    ap.add_argument("--threads", type=int, default=None)
    a = ap.parse_args()
    if not a.log.exists():
        t = time.perf_counter()
        generate(a.log, a.size_gb)
        print(f"generated {a.log} in {time.perf_counter() - t:.1f} s")
    size = a.log.stat().st_size
    cmd = [sys.executable, "-m", "cascade_plan", "analyze", str(a.log), "--model", "llama-3-8b", "--hardware", "h200",
           "--json"] + (["--threads", str(a.threads)] if a.threads else [])
    t = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if res.returncode:
        sys.exit(res.stderr)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024     # Linux: KiB
    import json

    doc = json.loads(res.stdout)
    print(f"log: {size / 1e9:.2f} GB, {doc['records']:,} records, {doc['steps']:,} steps, "
          f"{doc['requests']:,} requests, "
          f"{os.cpu_count()} cores")
    print(f"analyze: {wall:.1f} s wall ({size / 1e6 / wall:.0f} MB/s), peak RSS {peak / 2**30:.2f} GiB "
          f"(targets: < 60 s, < 1.5 GB)")
    print(f"verdict: cascade pays in {doc['decode_time']['overall']['share_of_steps_where_cascade_pays']:.1%} of steps")


if __name__ == "__main__":
    main()
