"""The routed experts where both sources measured them (the H200): AIConfigurator's MoE layer rows
(`moe_rows` of the imported file) against the probe's grouped-GEMM rows (`step_ops`), balanced routing, per
expert shape, TP and weight dtype both hold; rows of `validate`'s cross-check table (aic/crosscheck.py)."""

from __future__ import annotations

import numpy as np

from cascade_plan.cost.moe_table import MoeTable

COMPARE_M = (1, 8, 32, 64, 128, 256, 512, 1024)
WORKLOAD_POINT = ("deepseek-v3", 8, "fp8", 256)     # deepseek-v3-grpo-tp8's decode steps: 256 tokens


def _at(t: MoeTable, m) -> np.ndarray:
    return np.exp(np.interp(np.log(np.asarray(m, float)), np.log(t.m), np.log(t.seconds)))


def _name(t: MoeTable) -> str:
    from cascade_plan.inputs.model_presets import PRESETS
    from cascade_plan.inputs.model_spec import load_model

    for mid in sorted(PRESETS):
        m = load_model(mid)
        for tp in (1, 2, 4, 8):
            if m.num_experts and t.matches(m, tp, t.dtype):
                return f"{mid} TP {tp}"
    return f"{t.experts} experts of {t.hidden}x{t.intermediate}"


def moe_rows(aic_tables, probe_tables) -> list[dict]:
    """One row per shape both measured: AIC time / probe time over the tokens both cover (median, range);
    plus the workload point as seconds."""
    out = []
    for p in probe_tables:
        if p.routing != "balanced":
            continue
        a = next((t for t in aic_tables if t.origin == "aic" and t.routing == "balanced" and t.dtype == p.dtype
                  and (t.hidden, t.intermediate, t.experts, t.top_k) == (p.hidden, p.intermediate, p.experts, p.top_k)),
                 None)
        if a is None:
            continue
        m = [x for x in COMPARE_M if max(a.m[0], p.m[0]) <= x <= min(a.m[-1], p.m[-1])]
        if not m:
            continue
        r = _at(a, m) / _at(p, m)
        name = _name(p)
        out.append({"what": f"MoE experts {name} {p.dtype}, M {m[0]}-{m[-1]}: AIC time / probe time (median; "
                            f"range {r.min():.2f}-{r.max():.2f})",
                    "aic": float(np.median(r)), "probe": 1.0})
        mid, tp, dtype, tokens = WORKLOAD_POINT
        if name == f"{mid} TP {tp}" and p.dtype == dtype:
            out.append({"what": f"MoE experts {name} {dtype}, {tokens} tokens (s)", "aic": float(_at(a, tokens)),
                        "probe": float(_at(p, tokens))})
    return out
