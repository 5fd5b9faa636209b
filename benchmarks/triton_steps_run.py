"""Re-time Triton's whole decode steps on a GPU after a change to our kernels (the other backends' steps stay as
measured): the stepped workloads', the held-out models' and the held-out regime steps, each checked as the probe
checks them, with the fused glue where FlashInfer's glue matches torch's. Writes a probe-style document whose
`steps` rows `kernels_probe.merge.merge_sections(doc, base, ("steps", "step_skipped"))` lays over a calibration
file's (same identity: same row; the base keeps its ceilings and every other row).

    python benchmarks/triton_steps_run.py --out triton-steps.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import time

sys.path.insert(0, ".")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    import torch

    from cascade_plan.own_kernel_tune import DEFAULT_TUNE
    from kernels_probe import PROBE_VERSION
    from kernels_probe.attention import flashinfer_backend
    from kernels_probe.calibration_file import write_atomic
    from kernels_probe.runner import _device_info
    from kernels_probe.steps.step_probe import check_glue
    from kernels_probe.steps.step_shapes import (
        GEMM_FIT_MODELS,
        held_out_points,
        layer_shape,
        regime_held_out_points,
        step_points,
    )
    from kernels_probe.steps.whole_steps import STEP_TOLERANCE, measure_steps
    from kernels_probe.timing import L2Flusher, measure_ceilings

    t0 = time.perf_counter()
    ok, _ = flashinfer_backend.available()
    info = _device_info(torch, flashinfer_backend.version() if ok else None)
    flusher = L2Flusher(info["l2_bytes"] or (50 << 20), "cuda")
    # the format requires measured ceilings (a few seconds); merge the steps with
    # kernels_probe.merge.merge_sections(doc, base, ("steps", "step_skipped")) so the base keeps its own
    ceilings, _ = measure_ceilings(flusher, quick=True)
    glue = "torch"
    if ok and check_glue(layer_shape(GEMM_FIT_MODELS[0][0], 1), "cuda") <= STEP_TOLERANCE:
        glue = "fused"
    pts = step_points() + held_out_points() + regime_held_out_points()
    rows, skipped = measure_steps(flusher, "cuda", info["sm_count"], quick=False, backends=["triton"], glue=glue,
                                  points=pts)
    created = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    doc = {"schema_version": 1, "kind": "cascade-plan-calibration", "probe_version": PROBE_VERSION,
           "created_utc": created, "hardware_id": "h200", "device": info,
           "ceilings": {k: float(v) for k, v in ceilings.items()}, "steps": rows, "step_skipped": skipped,
           "notes": {"triton_steps_tune": repr(DEFAULT_TUNE)}}
    write_atomic(args.out, doc)
    print(f"{len(rows)} Triton steps, {len(skipped)} skipped, glue {glue}, {time.perf_counter() - t0:.0f} s")
    for s in skipped[:8]:
        print("SKIP", s.get("workload"), s.get("position"), s.get("mode"), s.get("reason", "")[:150])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
