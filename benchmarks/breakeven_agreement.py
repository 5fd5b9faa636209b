"""Breakeven tables against their own grid: N random calibrated sweeps (GPU with a shipped calibration,
model, KV dtype, TP, backend, prompt groups, suffix; the command's default prefix and group axes plus
random extra points), counting every grid point where either table disagrees with the grid. Prints the
count (the target is 0) and how many sweeps had a win that vanishes and reappears along an axis.

    PYTHONPATH=. python benchmarks/breakeven_agreement.py [N=400] [SEED=0]
"""

import sys
import time

import numpy as np

from cascade_plan import (
    InputError,
    ParamsChoice,
    Scenario,
    load_hardware,
    load_model,
    parse_axis,
    run_breakeven,
    select_params,
    simple_tree,
)
from cascade_plan.cost.breakeven import contradictions

GPUS = ["h200", "gb200", "gb300", "h100-sxm", "a100-80gb", "b200", "b300", "l40s"]
MODELS = ["llama-3-8b", "llama-3-70b", "codellama-13b", "qwen2.5-7b", "mistral-7b", "mixtral-8x7b"]
BACKENDS = [None, "triton", "torch", "flashinfer", "flashinfer-fa2"]


def random_case(rng):
    scn = Scenario(name="bench", model=load_model(rng.choice(MODELS)), hardware=load_hardware(rng.choice(GPUS)),
                   kv_dtype=str(rng.choice(["bf16", "fp8", "int8"])), weight_dtype="bf16",
                   tp=int(rng.choice([1, 2, 4, 8])),
                   prefix_caching=True, block_size=16, tree=simple_tree(1, 1, 1, 1))
    try:
        params = select_params(scn, ParamsChoice(backend=rng.choice(BACKENDS)))
    except InputError:                       # that backend is not in this GPU's calibration
        params = select_params(scn)
    prefix = np.unique(np.concatenate([parse_axis("64:65536:log", "--prefix"), rng.integers(1, 70000, 4)]))
    group = np.unique(np.concatenate([parse_axis("1:512:log", "--batch"), rng.integers(1, 600, 4)]))
    suffix = np.unique(rng.integers(0, 8192, int(rng.integers(1, 3))))
    return scn, params, prefix, group, suffix, int(rng.integers(1, 65))


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 400
    rng = np.random.default_rng(int(sys.argv[2]) if len(sys.argv) > 2 else 0)
    bad = points = reappear = calibrated = 0
    t = time.perf_counter()
    for _ in range(n):
        scn, params, prefix, group, suffix, groups = random_case(rng)
        res = run_breakeven(scn, params, prefix, group, suffix, groups)
        found = contradictions(res)
        bad += len(found)
        for line in found[:3]:
            print(f"CONTRADICTION {scn.model.id} on {scn.hardware.id} ({params.label}): {line}")
        points += res.sweep.speedup.size
        calibrated += params.mode != "default"
        spans = [c for t_ in (res.prefix_spans, res.group_spans) for row in t_ for c in row]
        reappear += any(len(c) > 1 or (c and c[-1][1] is not None) for c in spans)
    print(f"{n} sweeps ({calibrated} on calibrated numbers), {points:,} grid points: {bad} contradictions between "
          f"the breakeven tables and the grid; {reappear} sweeps where a win ends or reappears along an axis; "
          f"{time.perf_counter() - t:.1f} s")


if __name__ == "__main__":
    main()
