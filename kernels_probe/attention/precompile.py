"""Compile the Triton launches a probe pass will time before it times any, in parallel threads.

On a fresh machine compiling was most of the Triton pass (probe 1.4 on the H200: 141 of 185 s, one kernel after
another as the configurations came). Triton's AsyncCompileMode hands each compile to an executor and merges launches
with the same cache key; most of a compile (LLVM, ptxas) runs outside the GIL, so threads overlap. Each
configuration's plans are built over shape-only inputs (data.shape_data: a two-page cache), so that the warmups
compile exactly the specialisations the timed launches will look up, at no memory cost."""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor

from cascade_plan.own_kernel_tune import DEFAULT_TUNE, TuneParams
from kernels_probe.attention.grid import AttentionConfig


def precompile(cfgs: list[AttentionConfig], device, *, sm_count: int, tune: TuneParams = DEFAULT_TUNE,
               workers: int | None = None) -> dict:
    """Compile the launches the Triton backend makes for `cfgs` (triton_backend.plans) in `workers` threads (default:
    the CPUs less two, at most 12). Returns {'seconds', 'compiles', 'workers', 'failed_configs'}, or {'skipped':
    reason} where Triton cannot compile ahead (its interpreter, or a Triton without AsyncCompileMode). A configuration
    whose plans or warmups fail (counted in failed_configs) is left to compile when it is timed, where its error is
    reported as before."""
    if os.environ.get("TRITON_INTERPRET") == "1":
        return {"skipped": "Triton's interpreter compiles nothing"}
    try:
        from triton.runtime._async_compile import AsyncCompileMode
    except ImportError:
        return {"skipped": "this Triton has no AsyncCompileMode"}
    from kernels_probe.attention.data import shape_data
    from kernels_probe.attention.triton_backend import plans

    workers = workers or max(1, min(12, (os.cpu_count() or 4) - 2))
    t0 = time.perf_counter()
    failed = 0
    with ThreadPoolExecutor(workers) as pool:
        mode = AsyncCompileMode(pool, ignore_errors=True)
        with mode:
            for cfg in cfgs:
                try:
                    for plan in plans(shape_data(cfg, device), sm_count=sm_count, tune=tune):
                        if plan is not None:
                            plan.warmup()
                except Exception:   # noqa: BLE001 - the timed launch compiles it again and reports its error
                    failed += 1
        compiles = len(mode.raw_futures)
    return {"seconds": time.perf_counter() - t0, "compiles": compiles, "workers": workers, "failed_configs": failed}
