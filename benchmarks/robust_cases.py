"""The heavy inputs (huge trees, long outputs, large grids and logs) through the real CLI, one process each: exit
code, wall time, peak RSS.

    python benchmarks/robust_cases.py

Target: every case answers (exit 0/1) or is refused with one line (exit 2) within 2 s and 500 MB.
Prints one row per case and the worst wall time and memory; exit status 1 if a case misses."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WALL_S, RSS_MIB = 2.0, 500.0


def workload(tree: str, extra: str = "") -> str:
    return f"schema_version: 1\nmodel: llama-3-8b\n{extra}tree: {tree}\n"


def nested(depth: int) -> str:
    t = "{tokens: 1, samples: 1, output_tokens: 1}"
    for _ in range(depth):
        t = "{tokens: 1, children: [" + t + "]}"
    return t


def laughs(levels: int) -> str:
    text = "schema_version: 1\nmodel: llama-3-8b\nbogus0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1]\n"
    text += "".join(f"bogus{i}: &a{i} [" + ", ".join([f"*a{i-1}"] * 9) + "]\n" for i in range(1, levels + 1))
    return text + "tree: {tokens: 1, samples: 1, output_tokens: 1}\n"


def aliased_children(levels: int) -> str:
    text = ("schema_version: 1\nmodel: llama-3-8b\ntree:\n  tokens: 1\n"
            "  children: &c0 [{tokens: 1, samples: 1, output_tokens: 1}]\n")
    return text + "".join(f"x{i}: &c{i} [" + ", ".join(["{tokens: 1, children: *c%d}" % (i - 1)] * 9) + "]\n"
                          for i in range(1, levels + 1))


CASES = {
    "solo (no sharing)": (["estimate", "{w}"], workload("{tokens: 0, samples: 1, output_tokens: 1}",
                                                        "hardware: h200\nprefix_caching: false\n")),
    "tokens x copies x samples overflow": (["estimate", "{w}"], workload(
        "{tokens: 1000000, copies: 10000000, samples: 1000000, output_tokens: 2}")),
    "output_tokens 1e7": (["estimate", "{w}"],
                          workload("{tokens: 4096, copies: 2, samples: 64, output_tokens: 10000000}")),
    "output_tokens 1e8": (["estimate", "{w}"], workload("{tokens: 4096, samples: 64, output_tokens: 100000000}")),
    "output_tokens 1e7, report": (["report", "{w}", "--out", "{d}/rep", "--no-plots"],
                                  workload("{tokens: 4096, copies: 2, samples: 64, output_tokens: 10000000}")),
    "1e5 children": (["estimate", "{w}"], workload(
        "{tokens: 100, children: [" + ", ".join("{tokens: %d, samples: 1, output_tokens: 5}" % i
                                                for i in range(10**5)) + "]}")),
    "1 MiB of children (the largest file read)": (["estimate", "{w}"], workload(
        "{tokens: 100, children: [" + ", ".join("{tokens: %d, samples: 1, output_tokens: 5}" % i
                                                for i in range(22000)) + "]}")),
    "2,000 children, distinct outputs, check": (["check", "{w}", "--min-run-speedup", "1"], workload(
        "{tokens: 1000, children: [" + ", ".join("{tokens: %d, samples: %d, output_tokens: %d}" % (100 + i, 1 + i % 5,
                                                 50 + 1000 * i) for i in range(2000)) + "]}")),
    "9 aliased children x 6 levels": (["estimate", "{w}"], aliased_children(6)),
    "samples 1e9, check": (["check", "{w}", "--min-run-speedup", "1"], workload("{tokens: 4096, samples: 1000000000, "
                                                                                "output_tokens: 100}")),
    "1e9 sequences (1000 x 1e6), check": (["check", "{w}", "--min-run-speedup", "1"],
                                          workload("{tokens: 4096, copies: 1000, samples: 1000000, "
                                                   "output_tokens: 100}")),
    "1e9 sequences, report": (["report", "{w}", "--out", "{d}/rep9", "--no-plots"],
                              workload("{tokens: 4096, copies: 1000, samples: 1000000, output_tokens: 100}")),
    "breakeven 1:1e9:lin:1e9": (["breakeven", "--model", "llama-3-8b", "--prefix", "1:1e9:lin:1e9"], None),
    "breakeven at the grid cap": (["breakeven", "--model", "llama-3-8b", "--prefix", "1:1000000:lin:4000", "--batch",
                                   "1:512:lin:250", "--json"], None),
    "tree 495 levels deep": (["estimate", "{w}"], workload(nested(495))),
    "billion laughs, 8 levels": (["estimate", "{w}"], laughs(8)),
}


def run_case(args: list[str], text: str | None, tmp: Path) -> tuple[int, float, float, str]:
    w = tmp / "case.yaml"
    if text is not None:
        w.write_text(text)
    argv = [a.replace("{w}", str(w)).replace("{d}", str(tmp)) for a in args]
    code = ("import resource, sys, runpy; sys.argv = ['cascade-plan'] + sys.argv[1:]\n"
            "from cascade_plan.cli.app import main\n"
            "try:\n    main()\nfinally:\n"
            "    sys.stderr.write(f'\\nRSS_KIB {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}\\n')")
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "COLUMNS": "120"})
    wall = time.perf_counter() - t0
    rss = next((int(line.split()[1]) for line in res.stderr.splitlines() if line.startswith("RSS_KIB")), 0) / 1024
    err = [line for line in res.stderr.splitlines() if line.strip() and not line.startswith("RSS_KIB")]
    return res.returncode, wall, rss, (err[0] if err
                                       else res.stdout.strip().splitlines()[-1] if res.stdout.strip() else "")


def main() -> int:
    missed = 0
    worst_wall = worst_rss = 0.0
    print(f"{'case':42} {'exit':>4} {'wall s':>7} {'RSS MiB':>8}  first line")
    with tempfile.TemporaryDirectory() as d:
        for name, (args, text) in CASES.items():
            rc, wall, rss, line = run_case(args, text, Path(d))
            ok = rc in (0, 1, 2) and wall <= WALL_S and rss <= RSS_MIB and "Traceback" not in line
            missed += not ok
            worst_wall, worst_rss = max(worst_wall, wall), max(worst_rss, rss)
            print(f"{name:42} {rc:>4} {wall:>7.2f} {rss:>8.0f}  {'' if ok else 'MISS '}{line[:110]}")
    print(f"worst wall {worst_wall:.2f} s, worst peak RSS {worst_rss:.0f} MiB; {missed} case(s) over "
          f"{WALL_S} s / {RSS_MIB:.0f} MiB or not exit 0/1/2 (process start-up included; "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB for this runner)")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
