"""`aic-check`: AIConfigurator's own per-op decode estimate beside the planner's, on a grid of
configurations, term by term (the `aic` extra: aiconfigurator-core).

AIConfigurator's side is its compiled engine (`aiconfigurator_core.sdk.engine.EngineHandle.compile(model,
system, "vllm", tp_size=...)` then `decode_step_per_op(batch, isl, osl)`): one decode step, every op summed
over the layers, the names of its op list (`generation_attention`, `generation_qkv_gemm`, ...,
`generation_ar_1`). With osl = 2 it reads the attention table at s = isl + 2, so the planner is asked for
the same step: `batch` sequences, each with isl + 2 private tokens, no sharing, the shipped imported
calibration of that GPU (the H200's AIC file, not its probe file). Terms:

- attention: `generation_attention` vs the per-sequence decode attention;
- gemm: qkv, proj, gate_ffn1, ffn2 and logits GEMMs vs the dense GEMMs + lm_head (+ MoE experts);
- glue: embedding, add-norms, activation (AIConfigurator computes them by formula, not measured) vs the
  planner's measured glue;
- allreduce: `generation_ar_1` + `generation_ar_2` (+ `generation_embedding_ar`) vs the two all-reduces
  per layer; also per call: AIConfigurator's ar_1 / layers against the planner's one all-reduce;
- step: the sum.
"""

from __future__ import annotations

import contextlib
import io

import numpy as np

# (planner preset, AIConfigurator model id, TP): the cross-check grid (with batch 1-256, prompt 1K-8K and four GPUs,
# 180 configurations: docs/aic.md)
GRID_MODELS = (("llama-3-8b", "meta-llama/Meta-Llama-3.1-8B", 1), ("llama-3-70b", "meta-llama/Meta-Llama-3.1-70B", 4),
               ("llama-3-70b", "meta-llama/Meta-Llama-3.1-70B", 8))
GRID_GPUS = ("a100-80gb", "h100-sxm", "h200", "b200")
GRID_BATCH = (1, 8, 32, 128, 256)
GRID_ISL = (1024, 4096, 8192)
OSL = 2                      # one decode step after the prompt: attention read at isl + 2
TERMS = ("attention", "gemm", "glue", "allreduce", "step")


def aic_term(op_name: str) -> str | None:
    if op_name == "generation_attention":
        return "attention"
    if op_name.endswith("_gemm"):
        return "gemm"
    if op_name.startswith("generation_ar_") or op_name == "generation_embedding_ar":
        return "allreduce"
    if op_name == "generation_p2p":
        return None
    return "glue"


def _quiet():
    """AIConfigurator prints notes about its fallback tables while loading; keep them out of our output."""
    stack = contextlib.ExitStack()
    stack.enter_context(contextlib.redirect_stdout(io.StringIO()))
    stack.enter_context(contextlib.redirect_stderr(io.StringIO()))
    return stack


def aic_engine(aic_model: str, system: str, tp: int):
    try:
        from aiconfigurator_core.sdk.engine import EngineHandle
    except ImportError:
        from cascade_plan.errors import InputError

        raise InputError("aic-check runs AIConfigurator's own estimator: pip install 'cascade-plan[aic]'") from None
    import logging

    logging.getLogger("aiconfigurator_core").setLevel(logging.ERROR)
    with _quiet():
        return EngineHandle.compile(aic_model, system, "vllm", tp_size=tp)


def aic_step(handle, batch: int, isl: int) -> tuple[dict[str, float], float]:
    """(seconds per term, seconds per all-reduce call summed over layers of ar_1) of one decode step."""
    out = dict.fromkeys(TERMS, 0.0)
    ar1 = 0.0
    with _quiet():
        ops = handle.decode_step_per_op(batch, isl, OSL)
    for name, ms, *_ in ops:
        term = aic_term(name)
        if term is None:
            continue
        out[term] += ms * 1e-3
        if name == "generation_ar_1":
            ar1 = ms * 1e-3
    out["step"] = sum(out[t] for t in TERMS if t != "step")
    return out, ar1


def planner_step(model, hw, params, tp: int, batch: int, context: int) -> tuple[dict[str, float], float]:
    from cascade_plan.cost.cost_model import gpu_shape, single_level_load, step_costs

    g = gpu_shape(model, hw, "bf16", "bf16", tp)
    c = step_costs(single_level_load(0, batch, 1, context), g, model, "bf16", tp, params, prefix_caching=False)
    ar = params.step.allreduce_for(tp) if params.step is not None else None
    per_call = float(ar.time_s(batch * model.hidden_size * 2.0)) if (ar is not None and tp > 1) else 0.0
    terms = {"attention": float(c.ps_attention_s), "gemm": float(c.weight_s), "glue": float(c.glue_s),
             "allreduce": float(c.comm_s), "step": float(c.ps_step_s)}
    return terms, per_call


def crosscheck_grid(gpus=GRID_GPUS, models=GRID_MODELS, batches=GRID_BATCH, isls=GRID_ISL) -> dict:
    """Every configuration of the grid, both estimates per term, and the summary per term."""
    from cascade_plan.calibration.aic.tables import AIC_SYSTEMS
    from cascade_plan.calibration.calibration_file import find_committed
    from cascade_plan.calibration.probe_params import params_from_probe
    from cascade_plan.inputs.hardware import load_hardware
    from cascade_plan.inputs.model_spec import load_preset

    rows = []
    for gpu in gpus:
        hw = load_hardware(gpu)
        cal = find_committed(hw, source="aic")
        if cal is None:
            continue
        for preset, aic_model, tp in models:
            model = load_preset(preset)
            params = params_from_probe(cal, None, "bf16", hw, model)
            handle = aic_engine(aic_model, AIC_SYSTEMS[gpu], tp)
            for b in batches:
                for isl in isls:
                    a, a_call = aic_step(handle, b, isl)
                    p, p_call = planner_step(model, hw, params, tp, b, isl + OSL)
                    rows.append({"gpu": gpu, "model": preset, "tp": tp, "batch": b, "isl": isl,
                                 "aic_s": a, "planner_s": p,
                                 "allreduce_call_s": {"aic": a_call / model.num_layers if a_call else 0.0,
                                                      "planner": p_call}})
    return {"schema_version": 1, "calibrations": "shipped *-aic-vllm.json", "rows": rows, "summary": summarize(rows)}


def _diff(p: float, a: float) -> float | None:
    return p / a - 1.0 if a > 0 else None


def summarize(rows: list[dict]) -> dict:
    out = {}
    for t in TERMS:
        d = np.array([x for r in rows if (x := _diff(r["planner_s"][t], r["aic_s"][t])) is not None])
        if d.size:
            out[t] = {"n": int(d.size), "median_abs": float(np.median(np.abs(d))), "median": float(np.median(d)),
                      "min": float(d.min()), "max": float(d.max()), "over_10pct": int(np.sum(np.abs(d) > 0.10))}
    calls = np.array([_diff(r["allreduce_call_s"]["planner"], r["allreduce_call_s"]["aic"]) for r in rows
                      if r["tp"] > 1 and r["batch"] >= 16 and r["allreduce_call_s"]["aic"] > 0])
    if calls.size:
        out["allreduce_per_call_tp4_8_batch16_256"] = {"n": int(calls.size),
                                                       "median_abs": float(np.median(np.abs(calls))),
                                                       "min": float(calls.min()), "max": float(calls.max()),
                                                       "within_10pct": float(np.mean(np.abs(calls) <= 0.10))}
    return out
