"""Each kernel checked against the float32 reference on poisoned outputs and timed as the probe times a row (a CUDA
graph, L2 flushed before each replay): what benchmarks/decode_vs_flashinfer.py and decode_launch_oracle.py share."""

from __future__ import annotations

TOL = 1e-2


def gpu_with_flashinfer() -> tuple:
    """(GPU 0's SM count, an L2 flusher for it, why FlashInfer cannot run or "" once its decode modules are built)."""
    import torch

    from kernels_probe.attention import flashinfer_backend
    from kernels_probe.timing import L2Flusher

    props = torch.cuda.get_device_properties(0)
    ok, why = flashinfer_backend.available()
    if ok:
        build = flashinfer_backend.warm_build("cuda")
        why = "" if build.get("ok") else f"build failed: {build.get('errors')}"
    return props.multi_processor_count, L2Flusher(props.L2_cache_size), why


def time_as_probe(fn, flusher) -> dict:
    """time_fn's figures, timed a second time where the probe would time its row again (kernels_probe/runner.py:
    100 us or more, or p90 over 1.1x p10), the faster round kept: long rows read 0.82-0.92x FlashInfer's here where
    the probe's retimed rows read 0.97-0.98x (benchmarks/raw/device-2026-12-06e/stream-tiny.json)."""
    from kernels_probe.runner import RETIME_MIN_S, RETIME_SPREAD
    from kernels_probe.timing import time_fn

    res = time_fn(fn, flusher)
    if res["median_s"] >= RETIME_MIN_S or res["p90_s"] > RETIME_SPREAD * res["p10_s"]:
        again = time_fn(fn, flusher)
        res = again if again["median_s"] < res["median_s"] else res
    return res


def checked_err(fn, out, ref) -> float:
    """Run `fn` (which writes `out`) over an output poisoned with NaN and return its error against `ref`: what was
    not written stays NaN and fails."""
    import torch

    from kernels_probe.attention.reference import max_rel_err
    from kernels_probe.attention.timed import poisoned_run

    poisoned_run(out, fn)()
    torch.cuda.synchronize()
    return max_rel_err(out, ref)
