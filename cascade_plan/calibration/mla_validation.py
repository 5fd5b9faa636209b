"""How well the MLA fits and the interpolation of the MLA rows predict rows they did not see (`cascade-plan
validate` prints it beside the GQA tables): per KV dtype and probe kernel, the fit's |error| on the held-out rows
(calibration/mla_fit.py's rule: a whole head count, a whole prefix, one in six of the rest), on the 32-head rows
alone (a head count the fit never saw), and the leave-one-out error of the interpolation the planner applies
inside the grid. Whole MLA + MoE steps are scored apart (calibration/moe_step_validation.py, their own tables)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from cascade_plan.calibration.holdout import config_key
from cascade_plan.calibration.leave_one_out import leave_one_out
from cascade_plan.calibration.mla_fit import is_mla_held_out, mla_rows, predict_mla
from cascade_plan.calibration_schema.fitted import Fitted
from cascade_plan.calibration_schema.kernel_fit import BackendFit
from cascade_plan.calibration_schema.mla import MlaRow
from cascade_plan.cost.ops.mla_attention import MLA_BACKEND

KERNELS = ("decode_shared", "cascade_total", "cascade_prefix")
AXES = ("n_groups", "group_size", "prefix_tokens", "suffix_tokens")


def mla_validation(mla: Sequence[MlaRow], fitted: Fitted | None, l2_bytes: float) -> dict:
    """Per KV dtype and probe kernel: the fit's |error| on the held-out MLA rows (and on the training rows),
    and the largest held-out errors with their configurations."""
    out = {}
    for kv, per in (fitted.kv_dtypes if fitted is not None else {}).items():
        fits = per.get(MLA_BACKEND)
        if fits is None or fits.prefix_mla is None:
            continue
        res = {}
        for kernel in KERNELS:
            rows = mla_rows(mla, kernel, kv)
            if not rows:
                continue
            cfgs = [r.config for r in rows]
            t = np.array([r.median_s for r in rows], float)
            ape = np.abs(predict_mla(fits, kernel, cfgs, l2_bytes) / t - 1)
            held = np.array([is_mla_held_out(c) for c in cfgs])
            unseen = np.array([c.num_heads == 32 for c in cfgs])
            worst = [{"config": {k: getattr(cfgs[i], k) for k in ("num_heads", "n_groups", "group_size",
                                                                  "prefix_tokens", "suffix_tokens")},
                      "error": float(ape[i])}
                     for i in np.argsort(-np.where(held, ape, -1))[:3] if held[i]]
            res[kernel] = {"held_out": _stats(ape[held]), "train": _stats(ape[~held]),
                           "unseen_heads": _stats(ape[unseen]), "worst_held_out": worst}
        out[kv] = {"kernels": res, "interpolation": interpolation_loo(mla, kv, fits, l2_bytes),
                   "speedup": speedup_errors(mla, kv, fits, l2_bytes)}
    return out


def _stats(ape) -> dict:
    ape = np.asarray(ape, float)
    if not ape.size:
        return {"n": 0, "median": None, "max": None}
    return {"n": int(ape.size), "median": float(np.median(ape)), "max": float(np.max(ape))}


def speedup_errors(mla: Sequence[MlaRow], kv: str, fits: BackendFit, l2_bytes: float) -> dict:
    """|error| of the fitted per-layer speedup (per-sequence / cascade) on held-out configurations timed both ways."""
    ps = {config_key(r.config): r for r in mla_rows(mla, "decode_shared", kv)}
    pairs = [(ps[k], r) for r in mla_rows(mla, "cascade_total", kv)
             if (k := config_key(r.config)) in ps and is_mla_held_out(r.config)]
    if not pairs:
        return _stats([])
    cfgs = [c.config for _, c in pairs]
    measured = np.array([a.median_s / b.median_s for a, b in pairs])
    pred = predict_mla(fits, "decode_shared", cfgs, l2_bytes) / predict_mla(fits, "cascade_total", cfgs, l2_bytes)
    return _stats(np.abs(pred / measured - 1))


def interpolation_loo(mla: Sequence[MlaRow], kv: str, fits: BackendFit, l2_bytes: float) -> dict:
    """Each MLA row predicted from the other rows of its head count (the fit times their interpolated ratio
    to it, as the planner does), where they still bracket it."""
    out = {}
    for kernel in ("decode_shared", "cascade_total"):
        rows = mla_rows(mla, kernel, kv)
        interp, fit = leave_one_out(rows, lambda c: c.num_heads, AXES,
                                    lambda cfgs: predict_mla(fits, kernel, cfgs, l2_bytes))
        if rows:
            out[kernel] = {"rows": len(rows), "interpolation": _stats(interp), "fit_same_rows": _stats(fit)}
    return out


def render_mla(res: dict, console) -> None:
    from rich.table import Table

    from cascade_plan.units import fmt_pct

    if not res:
        return
    t = Table(title="MLA (FlashInfer's MLA wrapper): the fit's |error| on rows it did not see, and the interpolation "
                    "(leave-one-out)", title_justify="left")
    for col in ("KV", "kernel", "held out n", "median", "max", "32 heads (unseen) median", "max", "interp n",
                "interp median", "interp max"):
        t.add_column(col, justify="left" if col in ("KV", "kernel") else "right")
    for kv, r in res.items():
        for kernel, s in r["kernels"].items():
            h, u = s["held_out"], s["unseen_heads"]
            loo = (r.get("interpolation") or {}).get(kernel, {}).get("interpolation") or {"n": 0}
            t.add_row(kv, kernel, str(h["n"]), fmt_pct(h["median"]), fmt_pct(h["max"]), fmt_pct(u["median"]),
                      fmt_pct(u["max"]), str(loo["n"]), fmt_pct(loo.get("median")), fmt_pct(loo.get("max")))
    console.print(t)
    for kv, r in res.items():
        s = r.get("speedup") or {}
        if s.get("n"):
            console.print(f"MLA {kv}: per-layer speedup (per-sequence / cascade) on {s['n']} held-out configurations: "
                          f"median |error| {fmt_pct(s['median'])}, max {fmt_pct(s['max'])}")
    console.print("[dim]These are kernel errors per layer; whole MLA + MoE steps are in the MoE / MLA step tables "
                  "below.[/dim]")
