"""Start-up of `cascade-plan estimate` per calibration source: a GPU with an imported AIConfigurator
file (h100-sxm), the probe file (h200), none (mi300x), and --uncalibrated; each as the tables a user
reads (rich) and as --json. Each run is a fresh interpreter, as a user's shell starts it.
Prints the median and best wall time and the median CPU time
(user + system of the child: steadier than wall time on a shared machine).

    python benchmarks/estimate_startup.py [--repeats 15] [--src PATH] [--workload NAME[,NAME...]]
                                          [--output table,json] [--against PATH]

--src runs another checkout's code and data (e.g. a `git archive main` copy) for a before/after figure.
--workload picks other shipped workloads, comma-separated (default rl-rollouts-64; beam-search and
deepseek-v3-grpo-tp8 get extrapolated verdicts on the H200, which read the other backends of its calibration).
--output: the forms timed, comma-separated (default both; the tables import rich, --json does not).
--against PATH times a second tree in alternating rounds (one run of each tree per case per round, so both
see the same minutes of a shared machine) and prints one table: wall and CPU medians of both, per case.

Run it with bytecode enabled (`unset PYTHONDONTWRITEBYTECODE`): without .pyc files every run recompiles.
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


def timed(src: Path, workload: str, extra: list[str]) -> tuple[float, float]:
    """(wall s, CPU s) of one `estimate --json` in a fresh interpreter on the code and data of `src`."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    cmd = [sys.executable, "-m", "cascade_plan", "estimate", str(src / "workloads" / f"{workload}.yaml"), *extra]
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(cmd, check=True, env=env, cwd=src, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--src", type=Path, default=Path(__file__).resolve().parents[1])
    ap.add_argument("--workload", default="rl-rollouts-64")
    ap.add_argument("--output", default="table,json")
    ap.add_argument("--against", type=Path, default=None)
    a = ap.parse_args()
    trees = [a.src.resolve()] + ([a.against.resolve()] if a.against else [])
    forms = {"table": [], "json": ["--json"]}
    cases = [(w, f"{name}, {out}", extra + forms[out]) for w in a.workload.split(",") for name, extra in CASES
             for out in a.output.split(",")]
    runs: dict[tuple[int, int], list[tuple[float, float]]] = {}
    for tree in trees:          # compile each tree's bytecode once, outside the timed rounds
        timed(tree, cases[0][0], cases[0][2])
    print(f"cascade-plan estimate start-up, {a.repeats} fresh interpreters per case and tree, "
          f"trees: {', '.join(map(str, trees))}")
    for _ in range(a.repeats):
        for ci, (w, _, extra) in enumerate(cases):
            for ti, tree in enumerate(trees):
                runs.setdefault((ci, ti), []).append(timed(tree, w, extra))
    if a.against is None:
        for ci, (w, name, _) in enumerate(cases):
            wall, cpu = zip(*runs[(ci, 0)])
            print(f"  {w:22s} {name:32s} wall median {statistics.median(wall):.3f} s, best {min(wall):.3f} s; "
                  f"CPU median {statistics.median(cpu):.3f} s")
        return
    head = f"| workload | path | wall median {trees[0].name} | wall median {trees[1].name} | CPU {trees[0].name} " \
           f"| CPU {trees[1].name} |"
    print(head)
    print("|" + " --- |" * 6)
    for ci, (w, name, _) in enumerate(cases):
        (w0, c0), (w1, c1) = (zip(*runs[(ci, t)]) for t in (0, 1))
        print(f"| {w} | {name} | {statistics.median(w0):.3f} s | {statistics.median(w1):.3f} s "
              f"| {statistics.median(c0):.3f} s | {statistics.median(c1):.3f} s |")


if __name__ == "__main__":
    main()
