"""How long `cascade-plan report` takes for every shipped workload, as a user runs it (a fresh process, wall
clock), with and without SVG and parallel drawing. Prints figures; asserts nothing (the target, under 6 s on
a 2-core machine for the default, is read off the output). Wall time depends on what else the machine runs
(the load average is printed); CPU time, summed over worker processes, much less.

    python benchmarks/report_speed.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

VARIANTS = [
    ("default (PNG, one process per core)", []),
    ("--svg (PNG + SVG, parallel)", ["--svg"]),
    ("-j 1 (PNG, one process)", ["-j", "1"]),
    ("-j 1 --svg (as before: PNG + SVG, one process)", ["-j", "1", "--svg"]),
    ("--no-plots (analysis and markdown only)", ["--no-plots"]),
]


def run_once(extra: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the command and its worker processes)."""
    with tempfile.TemporaryDirectory() as out:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "cascade_plan", "report", "--out", out, *extra], check=True,
                       stdout=subprocess.DEVNULL)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"cascade-plan report, every shipped workload; {cores} cores; load average {os.getloadavg()[0]:.2f}; "
          f"median of {args.repeat}")
    # Round-robin over the variants, so that a change in the machine's load hits every variant alike.
    runs: dict[str, list[tuple[float, float]]] = {label: [] for label, _ in VARIANTS}
    for _ in range(args.repeat):
        for label, extra in VARIANTS:
            runs[label].append(run_once(extra))
    for label, _ in VARIANTS:
        walls, cpus = [w for w, _ in runs[label]], [c for _, c in runs[label]]
        print(f"  {label:<48} wall {statistics.median(walls):6.2f} s (min {min(walls):.2f}, max {max(walls):.2f})"
              f"   CPU {statistics.median(cpus):6.2f} s")


if __name__ == "__main__":
    main()
