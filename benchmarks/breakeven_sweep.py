"""How long the vectorised breakeven sweep takes for 1,000,000 grid points (1000 prefix lengths x
1000 group sizes, one suffix), and the exact-breakeven bisection over 1000 groups. Prints the figures.

    python benchmarks/breakeven_sweep.py     (after pip install .; or with PYTHONPATH=.)
"""

import time
from pathlib import Path

import numpy as np

from cascade_plan import DEFAULT, load_scenario
from cascade_plan.cost.breakeven import breakeven_group_size, breakeven_prefix_tokens, sweep


def best_of(fn, repeats=5):
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times), float(np.median(times))


def main() -> None:
    scn = load_scenario(Path("rl-rollouts-64"))                # a shipped workload, by name
    prefix = np.arange(1, 1001) * 64                        # 64 .. 64,000 tokens
    group = np.arange(1, 1001)
    n = prefix.size * group.size
    sweep(scn, DEFAULT, prefix[:10], group[:10], [512], 2)  # warm-up
    lo, med = best_of(lambda: sweep(scn, DEFAULT, prefix, group, [512], 2).speedup)
    print(f"sweep of {n:,} points: best {lo:.3f} s, median {med:.3f} s")
    lo, med = best_of(lambda: breakeven_prefix_tokens(scn, DEFAULT, group, [1, 512, 4096], 2))
    print(f"exact breakeven prefix for 1,000 group sizes x 3 suffixes (bisection): best {lo:.3f} s, median {med:.3f} s")
    lo, med = best_of(lambda: breakeven_group_size(scn, DEFAULT, prefix, [1, 512, 4096], 2))
    print(f"exact breakeven group for 1,000 prefixes x 3 suffixes (bisection): best {lo:.3f} s, median {med:.3f} s")


if __name__ == "__main__":
    main()
