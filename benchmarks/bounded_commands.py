"""The worst valid inputs of the serving and log commands (and `compare`) through the real CLI, one
process each: exit code, wall time, CPU time and peak RSS of that process.

    python benchmarks/bounded_commands.py            # every case
    python benchmarks/bounded_commands.py analyze    # the cases whose name contains 'analyze'

Target (README, "Limits"): every case answers within 5 s and 500 MB on two cores. The machine's load
average is printed beside the figures: on a shared machine wall time grows with the load, CPU time
much less. Peak RSS is the child's (ru_maxrss from wait4; it counts the runner's own pages at the fork,
about 30 MiB). Exit status 1 if a case misses the target or does not exit 0/1/2."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WALL_S, RSS_MIB = 5.0, 500.0
TIMEOUT_S = 60.0           # a case still running then is killed (exit -9) and counted as a miss


def _write(path: Path, lines) -> None:
    with open(path, "w") as fh:
        fh.writelines(lines)


def one_step_replicas(n: int):
    """n replicas of one logged step each (compact form): the per-replica tables have n rows."""
    def setup(d: Path) -> None:
        _write(d / "replicas.jsonl", (f'{{"ts":0.01,"replica":"r{i}","batch":64,"prefix":2048,"siblings":16,'
                                      f'"private":{100 + i % 7}}}\n' for i in range(n)))
    return setup


def per_sequence_replicas(n: int, seqs: int = 4):
    def setup(d: Path) -> None:
        row = ",".join(f'{{"request":"q{s}","group":"g","shared":2048,"private":{10 + s}}}' for s in range(seqs))
        _write(d / "seq-replicas.jsonl", (f'{{"ts":0.01,"replica":"r{i}","seqs":[{row}]}}\n' for i in range(n)))
    return setup


def deep_chain(levels: int, steps: int, seqs: int = 8):
    """Every sequence reads a chain of `levels` shared nodes (a 'levels' list that long)."""
    def setup(d: Path) -> None:
        group = "/".join(f"h{i}" for i in range(levels))
        ends = ",".join(str(16 * (i + 1)) for i in range(levels))
        row = ",".join(f'{{"request":"q{s}","group":"{group}","shared":{16 * levels},"private":{s + 1},'
                       f'"levels":[{ends}]}}' for s in range(seqs))
        _write(d / "chain.jsonl", (f'{{"ts":{k / 100},"replica":"r0","seqs":[{row}]}}\n' for k in range(steps)))
    return setup


def malformed(n: int):
    def setup(d: Path) -> None:
        good = '{"ts":0.01,"replica":"r0","batch":64,"prefix":2048,"siblings":16,"private":100}\n'
        _write(d / "bad.jsonl", itertools.chain([good], (f'{{"ts":{i},"replica":"r0","batch":-1,"prefix":2048,'
                                                          f'"siblings":16,"private":100}}\n' for i in range(n))))
    return setup


def workload(tree: str, name: str = "w.yaml"):
    def setup(d: Path) -> None:
        (d / name).write_text(f"schema_version: 1\nmodel: llama-3-8b\nhardware: h200\ntree: {tree}\n")
    return setup


def wide_tree(leaves: int) -> str:
    return ("{tokens: 2048, children: [" + ", ".join(f"{{tokens: {64 + i}, samples: {1 + i % 4}, output_tokens: "
                                                     f"{256 + 7 * i}}}" for i in range(leaves)) + "]}")


GPUS = "a100-40gb,a100-80gb,b200,b300,gb200,gb300,gh200,h100-pcie,h100-sxm,h200,l40s,mi300x,rtx-4090"

# name -> (setup or None, argv)
CASES = {
    "simulate-log 10,100 seqs, one long child": (
        workload("{tokens: 1000, children: [{tokens: 100, samples: 10000, output_tokens: 10}, "
                 "{tokens: 100, samples: 100, output_tokens: 49000}]}"),
        ["simulate-log", "{d}/w.yaml", "--out", "{d}/sim.jsonl"]),
    "simulate-log 100,000 seqs x 50 steps (row cap)": (
        workload("{tokens: 1000, copies: 100, children: [{tokens: 100, samples: 1000, output_tokens: 50}]}"),
        ["simulate-log", "{d}/w.yaml", "--out", "{d}/sim2.jsonl"]),
    "simulate-log 100,000 seqs x 50 steps, .gz": (
        workload("{tokens: 1000, copies: 100, children: [{tokens: 100, samples: 1000, output_tokens: 50}]}"),
        ["simulate-log", "{d}/w.yaml", "--out", "{d}/sim2.jsonl.gz"]),
    "simulate-log 2,047 leaves, 2,000 distinct lengths": (
        workload("{tokens: 1000, children: [" + ", ".join(f"{{tokens: 10, samples: 2, output_tokens: {1 + i}}}"
                                                           for i in range(2047)) + "]}"),
        ["simulate-log", "{d}/w.yaml", "--out", "{d}/sim3.jsonl"]),
    "analyze 20,000 one-step replicas": (one_step_replicas(20_000),
                                         ["analyze", "{d}/replicas.jsonl", "--model", "llama-3-8b", "--json"]),
    "analyze 200,000 one-step replicas": (one_step_replicas(200_000),
                                          ["analyze", "{d}/replicas.jsonl", "--model", "llama-3-8b", "--json"]),
    "analyze 200,000 one-step replicas, table": (one_step_replicas(200_000),
                                                 ["analyze", "{d}/replicas.jsonl", "--model", "llama-3-8b"]),
    "analyze 100,000 per-sequence replicas": (per_sequence_replicas(100_000),
                                              ["analyze", "{d}/seq-replicas.jsonl", "--model", "llama-3-8b", "--json"]),
    "analyze chain of 64 levels x 2,000 steps": (deep_chain(64, 2000),
                                                 ["analyze", "{d}/chain.jsonl", "--model", "llama-3-8b", "--json"]),
    "analyze --show-bad 10000 (1M malformed)": (malformed(1_000_000),
                                                  ["analyze", "{d}/bad.jsonl", "--model", "llama-3-8b",
                                                   "--show-bad", "10000", "--json"]),
    "route --replicas 4096": (None, ["route", "--model", "llama-3-8b", "--hardware", "h200", "--replicas", "4096",
                                     "--json"]),
    "route --replicas 4096 --plot": (None, ["route", "--model", "llama-3-8b", "--hardware", "h200",
                                            "--replicas", "4096",
                                            "--plot", "{d}/plots"]),
    "route --replicas 4096 --batch 4096": (None, ["route", "--model", "llama-3-8b", "--hardware", "h200",
                                                  "--replicas", "4096", "--batch", "4096", "--json"]),
    "rl 256 replica rollouts (the cap)": (None, ["rl", "--model", "llama-3-8b", "--hardware", "h200", "--replicas", "4",
                                                 "--sampled-steps", "64", "--json"]),
    "rl 65,536 completions on one replica, in waves": (None, [
        "rl", "--model", "llama-3-8b", "--hardware", "h200", "--prompts", "4096", "--samples", "16", "--replicas", "1",
        "--sampled-steps", "1", "--json"]),
    "rl 256 replicas x 256 completions": (None, ["rl", "--model", "llama-3-8b", "--hardware", "h200",
                                                 "--prompts", "4096",
                                                 "--samples", "16", "--replicas", "256", "--sampled-steps", "1",
                                                 "--json"]),
    "rl reproducer (512 x 16 on 8 replicas, waves)": (None, ["rl", "--model", "llama-3-8b", "--hardware", "h100-sxm",
                                                              "--prompts", "512", "--samples", "16", "--replicas", "8",
                                                              "--json"]),
    "compare 2,047 leaves x 13 GPUs x 5 KV dtypes": (
        workload(wide_tree(2046)),
        ["compare", "{d}/w.yaml", "--hardware", GPUS, "--kv-dtype", "bf16,fp16,fp8,int8,int4", "--json"]),
    "compare 2,047 leaves x 5 pairs (the cap)": (
        workload(wide_tree(2046)),
        ["compare", "{d}/w.yaml", "--hardware", "a100-80gb,b200,h100-sxm,h200,mi300x", "--json"]),
    "compare rl-rollouts-64 x 13 GPUs x 5 KV dtypes": (
        None, ["compare", "rl-rollouts-64", "--hardware", GPUS, "--kv-dtype", "bf16,fp16,fp8,int8,int4", "--json"]),
}


def run_case(setup, args: list[str], tmp: Path) -> tuple[int, float, float, float, str]:
    if setup is not None:
        setup(tmp)
    argv = [a.replace("{d}", str(tmp)) for a in args]
    code = "import sys; sys.argv = ['cascade-plan'] + sys.argv[1:]\nfrom cascade_plan.cli.app import main\nmain()"
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", code, *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            cwd=ROOT, env={**os.environ, "COLUMNS": "120", "PYTHONPATH": str(ROOT)}, text=True)
    timer = threading.Timer(TIMEOUT_S, proc.kill)
    timer.start()
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    timer.cancel()
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    first = next((line for line in err.splitlines() if line.strip()), "")
    return proc.returncode, wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, first


def main() -> int:
    only = sys.argv[1:]
    missed = 0
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores at start")
    print(f"{'case':48} {'exit':>4} {'wall s':>7} {'cpu s':>6} {'RSS MiB':>8}  first stderr line")
    for name, (setup, args) in CASES.items():
        if only and not any(o in name for o in only):
            continue
        with tempfile.TemporaryDirectory() as d:
            rc, wall, cpu, rss, line = run_case(setup, args, Path(d))
        # on a loaded machine (load average over the cores) wall time measures the neighbours: judge CPU time
        loaded = os.getloadavg()[0] > (os.cpu_count() or 1)
        ok = rc in (0, 1, 2) and (cpu if loaded else wall) <= WALL_S and rss <= RSS_MIB and "Traceback" not in line
        missed += not ok
        print(f"{name:48} {rc:>4} {wall:>7.2f} {cpu:>6.2f} {rss:>8.0f}  {'' if ok else 'MISS '}{line[:90]}",
              flush=True)
    print(f"load average {os.getloadavg()[0]:.1f} at end; {missed} case(s) over {WALL_S} s / {RSS_MIB:.0f} MiB or "
          "not exit 0/1/2 (process start-up included; CPU time judged while the load exceeds the cores)")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
