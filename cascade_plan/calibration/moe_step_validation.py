"""Whole MoE and MLA + MoE decode steps, predicted vs measured: the probe's ``steps`` rows with ``step_kind``
"moe" (GQA attention + routed experts) or "mla_moe" (MLA attention + routed experts; kernels_probe/moe/moe_step.py),
never fitted. Each row carries the config.json it was built from (a truncated layer count included), so the
planner prices exactly the measured model; a row timed on one GPU as one tensor-parallel shard
(``allreduce: false``) is compared with the planner's step without its all-reduce terms.

Reported apart from the dense steps (calibration/step_validation.py), per step kind, backend and KV dtype:
step time |error| (both modes), per-step cascade speedup |error|, against the same targets. "Held-out
shape" here: a model whose routed experts have no grouped-GEMM rows in the calibration (the planner
models them from the dense GEMM table).
"""

from __future__ import annotations

from cascade_plan.calibration.calibration_file import ProbeData
from cascade_plan.calibration.step_validation import (
    CASCADE_BACKEND,
    STEP_TARGETS,
    StepComparison,
    predict_step,
    run_speedups,
    step_dtypes,
    step_model,
    step_pairs,
    summarize,
)
from cascade_plan.calibration_schema.steps import STEP_KINDS, StepRow


def is_moe_step(row: StepRow) -> bool:
    return row.step_kind in STEP_KINDS


def moe_step_points(probe: ProbeData, hw, params=None) -> list[tuple[str, StepComparison]]:
    """(step kind, comparison) of every measured MoE / MLA step pair."""
    rows = [r for r in probe.steps if is_moe_step(r)]
    moe_models = {r.config.model for r in probe.step_ops if r.op == "moe_grouped_gemm"}
    out: list[tuple[str, StepComparison]] = []
    for r, ps in step_pairs(rows):
        wl, (kvd, wd), pos, tp, b = r.workload, step_dtypes(r), r.position, r.tp, r.backend
        pred_ps, pred_cas, parts = predict_step(probe, CASCADE_BACKEND[b], r.config, step_model(r), tp, hw, kvd, wd,
                                            params, r.glue)
        if r.allreduce is False:       # one GPU's shard: no all-reduce was timed
            pred_ps, pred_cas = pred_ps - parts["comm_s"], pred_cas - parts["comm_s"]
            parts = {**parts, "comm_s": 0.0, "comm_excluded": True}
        assert r.step_kind is not None
        out.append((r.step_kind, StepComparison(
            backend=b, workload=wl, model=r.model, tp=tp, position=pos, kv_dtype=kvd, weight_dtype=wd,
            step=r.config.generated, held_out_shape=r.model not in moe_models,
            measured_ps_s=ps.median_s, measured_cas_s=r.median_s, predicted_ps_s=pred_ps,
            predicted_cas_s=pred_cas, predicted_parts=parts)))
    return out


def validate_moe_steps(probe: ProbeData, hw) -> dict | None:
    """None where the file has no MoE / MLA step rows."""
    pts = moe_step_points(probe, hw)
    if not pts:
        return None
    kinds = sorted({k for k, _ in pts})
    return {"targets": STEP_TARGETS, "kinds": {k: STEP_KINDS[k] for k in kinds},
            "summary": {k: summarize([p for kk, p in pts if kk == k]) for k in kinds},
            "run_speedups": {k: run_speedups([p for kk, p in pts if kk == k]) for k in kinds},
            "points": [{"step_kind": k, "backend": p.backend, "workload": p.workload, "model": p.model, "tp": p.tp,
                        "kv_dtype": p.kv_dtype, "weight_dtype": p.weight_dtype, "position": p.position,
                        "step": p.step, "held_out_shape": p.held_out_shape,
                        "measured_per_sequence_s": p.measured_ps_s, "predicted_per_sequence_s": p.predicted_ps_s,
                        "measured_cascade_s": p.measured_cas_s, "predicted_cascade_s": p.predicted_cas_s,
                        "per_sequence_error": p.ps_err, "cascade_error": p.cas_err,
                        "measured_speedup": p.speedup_measured, "predicted_speedup": p.speedup_predicted,
                        "speedup_error": p.speedup_err, "predicted_parts": p.predicted_parts} for k, p in pts]}
