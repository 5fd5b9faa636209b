"""How much of a probe run is Triton compiling: run `python -m kernels_probe` in this process with a Triton
compilation listener that records every kernel compiled (not served from the cache), and print the compile seconds
per kernel and per specialisation next to the run's wall time. On a fresh machine (empty Triton cache) that is the
compile cost a user pays on a first `probe`.

    python benchmarks/probe_compile_times.py --out compile.json -- --out probe.json --backend triton
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time

sys.path.insert(0, ".")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True, help="JSON of every compile (kernel, constexprs, seconds)")
    ap.add_argument("probe_args", nargs=argparse.REMAINDER, help="after --: the probe's own arguments")
    args = ap.parse_args()
    probe_args = [a for a in args.probe_args if a != "--"]
    import triton
    from triton import knobs

    compiles: list[dict] = []

    def listener(*, src, metadata, times, cache_hit, **_):
        if cache_hit:
            return
        fn = getattr(src, "fn", None)
        name = getattr(fn, "__name__", None) or getattr(getattr(fn, "fn", None), "__name__", "?")
        consts = {str(k): v for k, v in (getattr(src, "constants", None) or {}).items()
                  if isinstance(v, (int, float, bool, str))}
        us = times.ir_initialization + sum(d for _, d in times.lowering_stages) + times.store_results
        compiles.append({"kernel": name, "constants": consts, "s": us / 1e6,
                         "stages_s": {n: d / 1e6 for n, d in times.lowering_stages}})

    knobs.compilation.listener = listener
    from kernels_probe.__main__ import main as probe_main

    t0 = time.perf_counter()
    rc = probe_main(probe_args)
    wall = time.perf_counter() - t0
    by_kernel: dict[str, list[float]] = collections.defaultdict(list)
    for c in compiles:
        by_kernel[c["kernel"]].append(c["s"])
    total = sum(c["s"] for c in compiles)
    with open(args.out, "w") as f:
        json.dump({"triton": triton.__version__, "probe_args": probe_args, "wall_s": wall, "compile_s": total,
                   "compiles": compiles}, f, indent=1, default=str)
    print(f"probe {' '.join(probe_args)}: rc {rc}, wall {wall:.1f} s, {len(compiles)} compiles, "
          f"{total:.1f} s compiling")
    print(f"{'kernel':40s} {'n':>4s} {'total s':>8s} {'max s':>6s}")
    for k, v in sorted(by_kernel.items(), key=lambda kv: -sum(kv[1])):
        print(f"{k:40s} {len(v):4d} {sum(v):8.1f} {max(v):6.1f}")
    return int(rc or 0)


if __name__ == "__main__":
    raise SystemExit(main())
