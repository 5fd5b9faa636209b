"""The MoE layer's routing / dispatch / combine term and MLA's per-layer glue (cost/step_parts.py
MoeLayerParams), fitted on ``moe_layer_graph`` step-op rows only: whole MoE / MLA + MoE decode steps timed
with their attention kernels left out (kernels_probe/moe/moe_step.py, merged by benchmarks/merge_moe_steps.py),
over batch sizes 1-512. The whole steps with attention (``steps`` rows with a step_kind) are never fitted:
they validate (calibration/moe_step_validation.py).

Each row's time, less what the planner already prices for that step (dense GEMMs, lm_head, glue, the routed
experts' grouped GEMMs: cost/step_terms.py, without the all-reduce a one-GPU shard does not run), is fitted as

    MoE layers x (fixed + per token x M x hidden + per touched expert x E(M)) + MLA layers x fixed,

four non-negative parameters by least squares on relative error (scipy's nnls is not used: the solve is
projected by hand so that calibrate needs numpy only). The per-token cost scales with the hidden size: the
router GEMM reads, the alignment moves and the combine sums rows of that width (a per-token term without it
fits the two training models as well, 1.9% / 4.5%, but puts Qwen3-30B-A3B's no-attention step 22% over,
against 7% with it)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import msgspec
import numpy as np

from cascade_plan.calibration_schema.steps import StepOpRow
from cascade_plan.cost.moe_routing import expected_experts_touched
from cascade_plan.cost.step_parts import MoeLayerParams, MoeLayerTable, StepParts, moe_layer_key
from cascade_plan.errors import InputError

OP = "moe_layer_graph"


def _features(row: StepOpRow, parts: StepParts, hw) -> tuple[float, float, np.ndarray, str, str]:
    """(measured s, already-priced s, the four regressors, the row's model label, its MoE layer shape key)."""
    from cascade_plan.cost.step_terms import step_ops
    from cascade_plan.inputs.dtypes import ELEMENT_BYTES
    from cascade_plan.inputs.model_spec import spec_from_hf_config

    c = row.config
    if row.model_config is None or c.m is None or c.tp is None or row.median_s is None:
        raise InputError(f"a {OP} row needs config.m, config.tp, median_s and the model_config it was built from",
                         field="step_ops")
    model = spec_from_hf_config(row.model_config, c.model or "moe step", f"{OP} row")
    wd = c.dtype or "bf16"
    if wd not in ELEMENT_BYTES:
        raise InputError(f"a {OP} row's weight dtype {wd!r} is not one of {sorted(ELEMENT_BYTES)}", field="step_ops")
    m = np.asarray([float(c.m)])
    ops = step_ops(model, c.tp, wd, m, parts, hw.hbm_bytes_per_s, hw.flop_per_s("fp8" if wd == "fp8" else "bf16"))
    priced = sum(float(ops[k].time_s[0]) for k in ("gemm", "lm_head", "moe", "glue", "kv_append") if k in ops)
    L = model.num_moe_layers
    x = np.array([L, L * float(c.m) * model.hidden_size, L * float(expected_experts_touched(model, m)[0]),
                  model.num_layers if model.attention == "mla" else 0.0])
    return (float(row.median_s), priced, x, f"{c.model} TP{c.tp} ({model.num_layers} layers, {wd} weights)",
            moe_layer_key(model, c.tp, wd))


def _nonneg_lstsq(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """min |a x - b| over x >= 0, by trying every set of free columns (four columns: 15 solves)."""
    best, best_r = np.zeros(a.shape[1]), float(np.sum(b * b))
    for k in range(1, a.shape[1] + 1):
        for cols in itertools.combinations(range(a.shape[1]), k):
            x_c = np.linalg.lstsq(a[:, cols], b, rcond=None)[0]
            if np.any(x_c < 0):
                continue
            x = np.zeros(a.shape[1])
            x[list(cols)] = x_c
            r = float(np.sum((a @ x - b) ** 2))
            if r < best_r:
                best, best_r = x, r
    return best


def fit_moe_layer(rows: Sequence[StepOpRow], parts: StepParts, hw) -> MoeLayerParams | None:
    """None where the file has no moe_layer_graph rows (or too few to fit four parameters). `parts` must
    carry the file's routed-expert tables (calibration/moe_rows.py with_moe_tables) and no moe_layer fit."""
    sel = [r for r in rows if r.op == OP and r.correct]
    if len(sel) < 4:
        return None
    base = parts if parts.moe_layer is None else msgspec.structs.replace(parts, moe_layer=None)
    feats = [_features(r, base, hw) for r in sel]
    meas = np.array([f[0] for f in feats])
    priced = np.array([f[1] for f in feats])
    x = np.array([f[2] for f in feats])
    coef = _nonneg_lstsq(x / meas[:, None], (meas - priced) / meas)
    err = np.abs((priced + x @ coef) / meas - 1)
    basis = f"{OP} rows of " + ", ".join(sorted({f[3] for f in feats})) + f", M {min(r.config.m or 0 for r in sel)}-" \
            f"{max(r.config.m or 0 for r in sel)}"
    return MoeLayerParams(per_layer_s=float(coef[0]), per_token_hidden_layer_s=float(coef[1]),
                          per_expert_layer_s=float(coef[2]), mla_per_layer_s=float(coef[3]), basis=basis,
                          n_train=len(sel), train_median_ape=float(np.median(err)), train_max_ape=float(err.max()),
                          measured=_tables(sel, feats, meas, priced, x, coef))


def _tables(sel: Sequence[StepOpRow], feats, meas: np.ndarray, priced: np.ndarray, x: np.ndarray,
            coef: np.ndarray) -> tuple[MoeLayerTable, ...]:
    """Per MoE layer shape, the term each row measured (its time less what is priced otherwise and less the
    fitted MLA glue, per MoE layer), over the batch sizes it was measured at (two at least)."""
    by_key: dict[str, dict[float, float]] = {}
    labels: dict[str, str] = {}
    for r, f, t, p, xi in zip(sel, feats, meas, priced, x):
        per_layer = (t - p - xi[3] * coef[3]) / xi[0]
        if per_layer > 0 and r.config.m:
            by_key.setdefault(f[4], {})[float(np.log2(r.config.m))] = float(per_layer)
            labels[f[4]] = f[3]
    return tuple(MoeLayerTable(key=k, log2_m=tuple(sorted(v)), per_layer_s=tuple(v[m] for m in sorted(v)),
                               label=labels[k])
                 for k, v in sorted(by_key.items()) if len(v) >= 2)
