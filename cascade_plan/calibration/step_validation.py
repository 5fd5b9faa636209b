"""Whole decode steps, predicted vs measured: the end-to-end check of the step model.

The probe's ``steps`` rows (model-shaped steps on the GPU, never used in fitting) are predicted with
the calibration's attention fits per backend plus its step parts (GEMM table, glue, all-reduce), at
the same load. Reported per row, per backend: the step time error, the per-step cascade speedup error,
and per stepped workload the run speedup over its measured steps (trapezoid over decode steps, the
same rule applied to the measured and the predicted step times). Steps of models whose GEMM shapes were
never probed are "held-out shape" steps; the targets are judged on all steps and on those.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import msgspec
import numpy as np

from cascade_plan.calibration.holdout import FIT_HEAD_DIM, FIT_MAX_PREFIX_TOKENS, FIT_MAX_SUFFIX_TOKENS, HELD_OUT_GROUPS
from cascade_plan.calibration_schema.steps import StepConfig, StepRow

if TYPE_CHECKING:
    from cascade_plan.calibration.calibration_file import ProbeData
    from cascade_plan.inputs.model_spec import ModelSpec

# step rows' attention kernels -> the planner backend whose fit prices them
CASCADE_BACKEND = {"flashinfer": "flashinfer", "flashinfer-fa2": "flashinfer-fa2", "triton": "triton"}
PER_SEQUENCE_ROW = {"flashinfer": "flashinfer", "flashinfer-fa2": "flashinfer", "triton": "triton"}
# whole-step accuracy targets: median, worst, run speedup median
STEP_TARGETS = {"step_median": 0.04, "step_max": 0.10, "speedup_median": 0.04}
# ... and on the held-out steps in the regimes below, per backend and KV dtype
REGIME_TARGETS = {"step_median": 0.03, "step_max": 0.08, "speedup_median": 0.03}
# A step's regime: where small models, long contexts and long suffixes run (the probe's regimes grid and step set).
# Past the core grids' head dim, query groups, prefixes and suffixes (holdout.py), or:
SMALL_MODEL_HIDDEN = 3072          # hidden sizes up to this (models under ~3B parameters) ...
SMALL_MODEL_BATCH = 512            # ... at this many sequences or more


def step_regimes(model: ModelSpec, cfg: StepConfig) -> tuple[str, ...]:
    """The regimes a measured step lies in (none: the core grid's): a small model at large batch, a head dim or
    query group the core grid lacks, a shared prefix over 64K, a private suffix over 4K tokens."""
    out = []
    seqs = cfg.group_size * cfg.n_groups
    if model.hidden_size <= SMALL_MODEL_HIDDEN and seqs >= SMALL_MODEL_BATCH:
        out.append(f"small model x {seqs} sequences")
    if model.attention != "mla" and model.head_dim != FIT_HEAD_DIM:
        out.append(f"head dim {model.head_dim}")
    g = model.num_q_heads // max(model.num_kv_heads, 1)
    if model.attention != "mla" and g in HELD_OUT_GROUPS:
        out.append(f"{g} query heads per KV head")
    if cfg.prefix_tokens > FIT_MAX_PREFIX_TOKENS:
        out.append(f"{cfg.prefix_tokens // 1024}K-token prefix")
    if cfg.suffix_tokens > FIT_MAX_SUFFIX_TOKENS:
        out.append(f"{cfg.suffix_tokens}-token suffix")
    return tuple(out)


@dataclass(frozen=True)
class StepComparison:
    """One whole decode step the probe timed, per-sequence and cascade, beside the planner's prediction of it."""

    backend: str
    workload: str
    model: str
    tp: int
    position: str
    step: int
    held_out_shape: bool
    measured_ps_s: float
    measured_cas_s: float
    predicted_ps_s: float
    predicted_cas_s: float
    predicted_parts: dict
    kv_dtype: str = "bf16"
    weight_dtype: str = "bf16"
    regimes: tuple[str, ...] = ()

    @property
    def ps_err(self) -> float:
        return self.predicted_ps_s / self.measured_ps_s - 1

    @property
    def cas_err(self) -> float:
        return self.predicted_cas_s / self.measured_cas_s - 1

    @property
    def speedup_measured(self) -> float:
        return self.measured_ps_s / self.measured_cas_s

    @property
    def speedup_predicted(self) -> float:
        return self.predicted_ps_s / self.predicted_cas_s

    @property
    def speedup_err(self) -> float:
        return self.speedup_predicted / self.speedup_measured - 1


def step_model(row: StepRow) -> ModelSpec:
    """The ModelSpec a step row was measured on: a preset id, or the config.json the row carries (held-out
    models the planner has no preset for)."""
    from cascade_plan.inputs.model_spec import load_preset, spec_from_hf_config

    if row.model_config:
        return spec_from_hf_config(row.model_config, row.model, "probe step row")
    return load_preset(row.model)


def step_dtypes(row: StepRow) -> tuple[str, str]:
    c = row.config
    return (row.kv_dtype or c.kv_dtype or "bf16", row.weight_dtype or c.weight_dtype or "bf16")


def _with_glue(probe: ProbeData, params, glue: str | None):
    """`params` with the engine glue a step ran (fused FlashInfer kernels or plain torch), fitted from the file's
    glue rows of that variant, where it is not the calibration's own; as given where the file has none."""
    if glue is None or params.step is None or params.step.glue.variant == glue:
        return params
    from cascade_plan.calibration.step_fit import fit_glue

    fitted = probe.derived(f"glue:{glue}", lambda p: fit_glue(p.step_ops, glue, p.ceilings))   # once per file
    if fitted is None:
        return params
    return msgspec.structs.replace(params, step=msgspec.structs.replace(params.step, glue=fitted))


def predict_step(probe: ProbeData, backend: str, cfg: StepConfig, model: ModelSpec, tp: int, hw, kv_dtype: str = "bf16",
             weight_dtype: str = "bf16", params=None, glue: str | None = None) -> tuple[float, float, dict]:
    from cascade_plan.calibration.probe_params import params_from_probe
    from cascade_plan.cost.cost_model import gpu_shape, single_level_load, step_costs

    if callable(params):          # a resolver (backend, model, KV dtype) -> CostParams
        params = params(backend, model, kv_dtype)
    params = _with_glue(probe, params or params_from_probe(probe, backend, kv_dtype, hw, model), glue)
    g = gpu_shape(model, hw, kv_dtype, weight_dtype, tp)
    load = single_level_load(cfg.prefix_tokens, cfg.group_size, cfg.n_groups, cfg.suffix_tokens)
    c = step_costs(load, g, model, weight_dtype, tp, params)
    parts = {"gemm_s": float(c.weight_s), "glue_s": float(0.0 if c.glue_s is None else c.glue_s),
             "comm_s": float(0.0 if c.comm_s is None else c.comm_s),
             "per_sequence_attention_s": float(c.ps_attention_s), "cascade_attention_s": float(c.cas_attention_s)}
    return float(c.ps_step_s), float(c.cas_step_s), parts


def step_pairs(rows: Sequence[StepRow]) -> Iterator[tuple[StepRow, StepRow]]:
    """(cascade row, its per-sequence twin) of every measured step pair, in key order (a re-measured row wins)."""
    index: dict[tuple, StepRow] = {(r.workload, *step_dtypes(r), r.position, r.tp, r.backend, r.mode): r for r in rows}
    for (wl, kvd, wd, pos, tp, b, mode), r in sorted(index.items()):
        if mode != "cascade" or b not in CASCADE_BACKEND:
            continue
        ps = index.get((wl, kvd, wd, pos, tp, PER_SEQUENCE_ROW[b], "per_sequence"))
        if ps is not None:
            yield r, ps


def step_points(probe: ProbeData, hw, params=None) -> list[StepComparison]:
    """Every measured step pair, predicted with each backend's fit (or with `params` for all of them,
    e.g. the default efficiencies, to measure their error)."""
    # MoE / MLA steps (a step_kind) are validated on their own (calibration/moe_step_validation.py)
    rows = [r for r in probe.steps if not r.step_kind]
    fit_models = {r.config.model for r in probe.step_ops if r.op == "gemm"}
    out = []
    for r, ps in step_pairs(rows):
        wl, (kvd, wd), pos, tp, b = r.workload, step_dtypes(r), r.position, r.tp, r.backend
        model = step_model(r)
        pred_ps, pred_cas, parts = predict_step(probe, CASCADE_BACKEND[b], r.config, model, tp, hw, kvd, wd,
                                            params, r.glue)
        out.append(StepComparison(backend=b, workload=wl, model=r.model, tp=tp, position=pos, kv_dtype=kvd,
                                  weight_dtype=wd, step=r.config.generated, held_out_shape=r.model not in fit_models,
                                  measured_ps_s=ps.median_s, measured_cas_s=r.median_s, predicted_ps_s=pred_ps,
                                  predicted_cas_s=pred_cas, predicted_parts=parts,
                                  regimes=step_regimes(model, r.config)))
    return out


def _trapezoid(steps, values) -> float:
    s, v = np.asarray(steps, float), np.asarray(values, float)
    if s.size == 1:
        return float(v[0])
    trapezoid = getattr(np, "trapezoid", None) or getattr(np, "trapz")    # numpy 2 renamed it
    return float(trapezoid(v, s) / (s[-1] - s[0]))


def run_speedups(points: list[StepComparison]) -> list[dict]:
    groups: dict = {}
    for p in points:
        groups.setdefault((p.backend, p.workload, p.tp, p.kv_dtype, p.weight_dtype), []).append(p)
    out = []
    for (b, wl, tp, kvd, wd), ps in sorted(groups.items()):
        ps = sorted(ps, key=lambda p: p.step)
        if len(ps) < 2:
            continue
        st = [p.step for p in ps]
        meas = _trapezoid(st, [p.measured_ps_s for p in ps]) / _trapezoid(st, [p.measured_cas_s for p in ps])
        pred = _trapezoid(st, [p.predicted_ps_s for p in ps]) / _trapezoid(st, [p.predicted_cas_s for p in ps])
        out.append({"backend": b, "workload": wl, "tp": tp, "kv_dtype": kvd, "weight_dtype": wd, "steps": st,
                    "measured_speedup": meas,
                    "predicted_speedup": pred, "error": pred / meas - 1})
    return out


def _stats(errs) -> dict:
    a = np.abs(np.asarray(errs, float))
    if a.size == 0:
        return {"n": 0, "median": None, "max": None}
    return {"n": int(a.size), "median": float(np.median(a)), "max": float(a.max())}


def summarize(points: list[StepComparison]) -> dict:
    """Per backend (and per backend and KV dtype, as "backend/kv_dtype"): step time |error| (both modes) and
    speedup |error|, over the steps outside the regimes (those have their own summary and targets:
    summarize_regimes) and over the held-out shapes among them."""
    out = {}
    points = [p for p in points if not p.regimes]
    keys: list[tuple[str, str | None]] = [(b, None) for b in sorted({p.backend for p in points})]
    keys += sorted({(p.backend, p.kv_dtype) for p in points})
    for b, kvd in keys:
        pts = [p for p in points if p.backend == b and (kvd is None or p.kv_dtype == kvd)]
        held = [p for p in pts if p.held_out_shape]
        step_all = [e for p in pts for e in (p.ps_err, p.cas_err)]
        step_held = [e for p in held for e in (p.ps_err, p.cas_err)]
        s_all, s_held = _stats(step_all), _stats(step_held)
        sp_all = _stats([p.speedup_err for p in pts])
        met = (s_all["n"] > 0 and s_all["median"] <= STEP_TARGETS["step_median"]
               and s_all["max"] <= STEP_TARGETS["step_max"] and sp_all["median"] <= STEP_TARGETS["speedup_median"])
        out[b if kvd is None else f"{b}/{kvd}"] = {"step": s_all, "step_held_out_shape": s_held, "speedup": sp_all,
                  "speedup_held_out_shape": _stats([p.speedup_err for p in held]), "targets_met": bool(met)}
    return out


def summarize_regimes(points: list[StepComparison]) -> dict:
    """Per backend and KV dtype ("backend/kv_dtype"): the held-out-shape steps in a regime, step |error| (both
    modes) and speedup |error|, against REGIME_TARGETS; and the regimes they cover."""
    out = {}
    pts = [p for p in points if p.regimes and p.held_out_shape]
    for b, kvd in sorted({(p.backend, p.kv_dtype) for p in pts}):
        sel = [p for p in pts if p.backend == b and p.kv_dtype == kvd]
        st, sp = _stats([e for p in sel for e in (p.ps_err, p.cas_err)]), _stats([p.speedup_err for p in sel])
        met = (st["median"] <= REGIME_TARGETS["step_median"] and st["max"] <= REGIME_TARGETS["step_max"]
               and sp["median"] <= REGIME_TARGETS["speedup_median"])
        worst = max(sel, key=lambda p: max(abs(p.ps_err), abs(p.cas_err)))
        worst_mode = "per_sequence" if abs(worst.ps_err) >= abs(worst.cas_err) else "cascade"
        out[f"{b}/{kvd}"] = {"step": st, "speedup": sp, "targets_met": bool(met),
                             "workloads": sorted({p.workload for p in sel}),
                             "regimes": sorted({r for p in sel for r in p.regimes}),
                             "worst": {"workload": worst.workload, "position": worst.position, "mode": worst_mode}}
    return out


def speedup_errors(probe, hw, params=None) -> dict[str, dict[str, list[float]]]:
    """Per backend, the per-step cascade speedup error (predicted / measured - 1, signed) of the measured steps,
    split by regime: "probed" (the model's GEMM shapes were probed) and "held_out" (they were not), as `summarize`
    reports them, and "regimes" (held-out steps in the regimes, `step_regimes`: their own summary, not a core
    verdict's margin); `params` predicts every step with one set of numbers instead of each backend's fit."""
    out: dict[str, dict[str, list[float]]] = {}
    if params is None:            # each backend's fit, built once per (backend, model) rather than per row
        import functools

        from cascade_plan.calibration.probe_params import params_from_probe

        params = functools.lru_cache(maxsize=None)(lambda b, m, kvd: params_from_probe(probe, b, kvd, hw, m))
    for p in step_points(probe, hw, params):
        regime = "regimes" if p.regimes else "held_out" if p.held_out_shape else "probed"
        out.setdefault(p.backend, {"probed": [], "held_out": []}).setdefault(regime, []).append(p.speedup_err)
    return out


def validate_steps(probe, hw) -> dict:
    pts = step_points(probe, hw)
    return {"targets": STEP_TARGETS, "summary": summarize(pts), "run_speedups": run_speedups(pts),
            "regime_targets": REGIME_TARGETS, "regimes": summarize_regimes(pts),
            "points": [{"backend": p.backend, "workload": p.workload, "model": p.model, "tp": p.tp,
                        "kv_dtype": p.kv_dtype, "weight_dtype": p.weight_dtype,
                        "position": p.position, "step": p.step, "held_out_shape": p.held_out_shape,
                        "measured_per_sequence_s": p.measured_ps_s, "predicted_per_sequence_s": p.predicted_ps_s,
                        "measured_cascade_s": p.measured_cas_s, "predicted_cascade_s": p.predicted_cas_s,
                        "per_sequence_error": p.ps_err, "cascade_error": p.cas_err,
                        "measured_speedup": p.speedup_measured, "predicted_speedup": p.speedup_predicted,
                        "speedup_error": p.speedup_err, "predicted_parts": p.predicted_parts,
                        "regimes": list(p.regimes)} for p in pts]}
