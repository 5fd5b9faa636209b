"""Start-up of `cascade-plan estimate` per calibration source: a GPU with an imported AIConfigurator
file (h100-sxm), the probe file (h200), none (mi300x), and --uncalibrated. Each run is a fresh
interpreter, as a user's shell starts it. Prints the median and best wall time and the median CPU time
(user + system of the child: steadier than wall time on a shared machine).

    python benchmarks/estimate_startup.py [--repeats 15] [--src PATH] [--workload NAME]

--src runs another checkout's code and data (e.g. a `git archive main` copy) for a before/after figure.
--workload picks another shipped workload (default rl-rollouts-64; beam-search and deepseek-v3-grpo-tp8 get
extrapolated verdicts on the H200, which read the other backends of its calibration).
"""

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

CASES = [("h100-sxm (aic file)", ["--hardware", "h100-sxm"]), ("h200 (probe file)", ["--hardware", "h200"]),
         ("mi300x (no file)", ["--hardware", "mi300x"]),
         ("h100-sxm --uncalibrated", ["--hardware", "h100-sxm", "--uncalibrated"])]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--src", type=Path, default=Path(__file__).resolve().parents[1])
    ap.add_argument("--workload", default="rl-rollouts-64")
    a = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": str(a.src)}
    workload = str(a.src / "workloads" / f"{a.workload}.yaml")
    print(f"cascade-plan estimate {a.workload} start-up, {a.repeats} fresh interpreters each, code from {a.src}")
    for name, extra in CASES:
        cmd = [sys.executable, "-m", "cascade_plan", "estimate", workload, "--json", *extra]
        times, cpu = [], []
        for _ in range(a.repeats):
            r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t = time.perf_counter()
            subprocess.run(cmd, check=True, env=env, cwd=a.src, stdout=subprocess.DEVNULL)
            times.append(time.perf_counter() - t)
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu.append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
        print(f"  {name:26s} wall median {statistics.median(times):.3f} s, best {min(times):.3f} s; "
              f"CPU median {statistics.median(cpu):.3f} s")


if __name__ == "__main__":
    main()
