"""Whole model-shaped decode steps (all layers in one CUDA graph) per attention backend and mode: each
checked against a float32 reference and its per-sequence twin, then timed. Used by the single-GPU step
probe (``step_probe``) and by each rank of the multi-GPU probe (``multi_gpu``), which passes its
all-reduce and its rank-synchronised timer. Rows go to the calibration file's ``steps`` (validation only).
"""

from __future__ import annotations

import gc

import torch

from kernels_probe.attention.reference import rel_err
from kernels_probe.steps.step_shapes import WorkloadStep, layer_shape, step_points
from kernels_probe.timing import time_fn

STEP_TOLERANCE = 1e-2      # attention output vs float32 reference, and per-sequence vs cascade


def time_step(step, flusher, *, budget_s: float = 0.15) -> dict:
    return time_fn(step, flusher, budget_s=budget_s, lo=5, hi=30)


def correctness_failure(e_ref, e_mode) -> str | None:
    """Why a step fails its checks (no reference error, or one over STEP_TOLERANCE), or None."""
    bad = [x for x in (e_ref, e_mode) if x is not None and not x <= STEP_TOLERANCE]
    return f"correctness: ref err {e_ref}, vs per-sequence {e_mode}" if e_ref is None or bad else None


def passing_steps(check, kv, steps: dict, pt, base: dict, skipped: list):
    """Yield (backend, mode), step, reference error, error vs per-sequence for each step that passes its checks
    (``check(kv, steps, pt)``: compare_modes or the MLA twin); each one that fails, or all where the check
    itself raises, goes to ``skipped`` with its reason (as it is reached, in the order of ``steps``)."""
    try:
        chk = check(kv, steps, pt)
    except Exception as exc:  # noqa: BLE001
        skipped += [{**base, "backend": b, "mode": m, "reason": f"check failed: {type(exc).__name__}: "
                     f"{exc}"[:300]} for (b, m) in steps]
        return
    for (b, mode), st in steps.items():
        e_ref, e_mode = chk["ref_err"].get((b, mode)), chk["mode_err"].get((b, mode))
        why = correctness_failure(e_ref, e_mode)
        if why:
            skipped.append({**base, "backend": b, "mode": mode, "reason": why})
            continue
        yield (b, mode), st, e_ref, e_mode


def compare_modes(kv, steps: dict, pt: WorkloadStep) -> dict:
    """Run each step once eagerly on the same random q of layer 0: every attention output against a
    float32 reference on a few sequences, and each cascade against its per-sequence twin on all of them."""
    from kernels_probe.steps.step_model import check_rows, reference_attention

    q0 = torch.randn_like(next(iter(steps.values())).q)
    rows = check_rows(pt)
    ref = reference_attention(kv, 0, q0, rows)
    outs, errs = {}, {}
    for key, st in steps.items():
        st.q.copy_(q0)
        st.attn.out.fill_(float("nan"))
        o = st.attn(0).clone()
        outs[key] = o
        errs[key] = rel_err(o[torch.tensor(rows, device=o.device)], ref)
    pairs = {}
    for (b, mode), o in outs.items():
        if mode == "cascade":
            twin = ("triton" if b == "triton" else "flashinfer", "per_sequence")
            if twin in outs:
                pairs[(b, mode)] = rel_err(o, outs[twin])
    return {"ref_err": errs, "mode_err": pairs}


def measure_steps(flusher, device, sm_count: int, *, quick: bool, backends: list[str], glue: str,
                  budget_s: float = 0.15, tp: int = 1, allreduce=None, rank: int = 0, points=None,
                  timer=None, progress=None, seed: int = 0, shapes=None) -> tuple[list, list]:
    """Whole decode steps at each step point, per attention backend and mode."""
    from kernels_probe.steps.step_model import DecodeStep, StepKV, StepWeights

    rows, skipped = [], []
    pts = points if points is not None else step_points(quick)
    by_model: dict[tuple[str, str], list[WorkloadStep]] = {}
    for pt in pts:
        by_model.setdefault((pt.model, pt.weight_dtype), []).append(pt)
    timer = timer or time_step
    for (model, wdtype), mpts in by_model.items():
        from kernels_probe.steps.step_shapes import model_config

        try:
            shape = (shapes or {}).get(model) or layer_shape(model, tp)
            mcfg = None if (shapes or {}).get(model) else model_config(model)
        except ValueError as exc:       # a held-out config missing from this install, a shape TP cannot split
            skipped += [{"workload": pt.workload, "model": model, "tp": tp, "position": pt.position,
                         "reason": str(exc)[:300]} for pt in mpts]
            continue
        weights = StepWeights(shape, device, seed=seed, weight_dtype=wdtype)
        for pt in mpts:
            base = {"workload": pt.workload, "model": model, "tp": tp, "position": pt.position,
                    "config": pt.as_dict(), "glue": glue, "kv_dtype": pt.kv_dtype, "weight_dtype": wdtype}
            if mcfg is not None and model_held_out(model):
                base["model_config"] = mcfg   # validation prices the step from this config
            kv = StepKV(shape, pt, device, seed=seed + 1)
            steps = {}
            for b in backends:
                modes = ["cascade"] if b == "flashinfer-fa2" else ["per_sequence", "cascade"]
                for mode in modes:
                    try:
                        steps[(b, mode)] = DecodeStep(shape, weights, kv, b, mode, glue=glue, allreduce=allreduce,
                                                      sm_count=sm_count, seed=seed)
                    except Exception as exc:
                        skipped.append({**base, "backend": b, "mode": mode,
                                        "reason": f"{type(exc).__name__}: {exc}"[:300]})
            for (b, mode), st, e_ref, e_mode in passing_steps(compare_modes, kv, steps, pt, base, skipped):
                try:
                    res = timer(st, flusher, budget_s=budget_s)
                except Exception as exc:
                    skipped.append({**base, "backend": b, "mode": mode,
                                    "reason": f"timing failed: {type(exc).__name__}: {exc}"[:300]})
                    torch.cuda.synchronize()
                    continue
                rows.append({**base, "backend": b, "mode": mode, "attention_variant": st.attn.variant,
                             "kv_cache_bytes": kv.bytes(), **res, "max_rel_err": e_ref,
                             "max_rel_err_vs_per_sequence": e_mode})
                if progress:
                    progress()
            del steps, kv
            gc.collect()
            torch.cuda.empty_cache()
        del weights
        gc.collect()
        torch.cuda.empty_cache()
    return rows, skipped


def model_held_out(model: str) -> bool:
    from cascade_plan.inputs.model_presets import PRESETS

    return model not in PRESETS
