"""The non-attention terms of a decode step: the sum of its operations (cost/ops/), one module per kind:
the dense weight GEMMs of every layer (ops/gemm.py), the routed MoE experts (ops/moe.py) and the rest of
each MoE layer (router, alignment, combine: ops/moe_dispatch.py), MLA's per-layer glue (ops/mla_glue.py), the lm_head
(ops/lm_head.py), the engine glue (ops/glue.py) and the two all-reduces per layer under tensor
parallelism (ops/allreduce.py). Each returns an `OpCost` (bytes, FLOPs, time); `step_ops` gives
them keyed by op name. Pure numpy.
"""

from __future__ import annotations

import msgspec
import numpy as np

from cascade_plan.cost.ops import allreduce as _allreduce
from cascade_plan.cost.ops import gemm as _gemm
from cascade_plan.cost.ops import glue as _glue
from cascade_plan.cost.ops import lm_head as _lm_head
from cascade_plan.cost.ops import mla_glue as _mla_glue
from cascade_plan.cost.ops import moe as _moe
from cascade_plan.cost.ops import moe_dispatch as _moe_dispatch
from cascade_plan.cost.ops.base import OpCost
from cascade_plan.cost.ops.gemm import gemm_table_key, layer_gemms  # noqa: F401  (re-exported: callers import them here)
from cascade_plan.cost.step_parts import StepParts
from cascade_plan.inputs.dtypes import ELEMENT_BYTES

ACTIVATION_BYTES = 2.0   # bf16 activations: all-reduce messages and GEMM inputs/outputs


class StepTerms(msgspec.Struct, frozen=True):
    """Seconds per decode step, arrays over the step grid."""

    gemm_s: np.ndarray       # dense GEMMs + lm_head + MoE experts
    glue_s: np.ndarray
    comm_s: np.ndarray
    gemm_dtype: str          # the efficiency table used ("bf16" or "fp8")
    # The K/V append when the calibration's per-sequence decode already includes it (AIConfigurator's):
    # the per-sequence step must not add it again, the cascade step (probe kernels) must add it once.
    kv_append_s: np.ndarray | float = 0.0


def step_ops(model, tp: int, weight_dtype: str, tokens, parts: StepParts, hbm_bytes_per_s: float,
             flop_per_s: float) -> dict[str, OpCost]:
    """Every non-attention operation of decode steps of `tokens` sequences (one token each), by name."""
    eb = ELEMENT_BYTES[weight_dtype]
    args = (model, tp, weight_dtype, tokens, parts, eb, hbm_bytes_per_s, flop_per_s)
    ops = {"gemm": _gemm.cost(*args), "lm_head": _lm_head.cost(*args)}
    moe = _moe.cost(*args)
    if moe is not None:
        ops["moe"] = moe
    extra = {"moe_dispatch": _moe_dispatch.cost(model, tp, tokens, parts, weight_dtype),
             "mla_glue": _mla_glue.cost(model, tokens, parts)}
    ops.update({k: v for k, v in extra.items() if v is not None})
    ops["glue"] = _glue.cost(model, tp, tokens, parts)
    ops["kv_append"] = _glue.kv_append(model, tp, tokens, parts)
    ops["allreduce"] = _allreduce.cost(model, tp, tokens, parts)
    return ops


def step_terms(model, tp: int, weight_dtype: str, tokens, parts: StepParts, hbm_bytes_per_s: float,
               flop_per_s: float) -> StepTerms:
    """GEMM, glue and communication seconds of decode steps of `tokens` sequences (one token each)."""
    ops = step_ops(model, tp, weight_dtype, tokens, parts, hbm_bytes_per_s, flop_per_s)
    dense = ops["gemm"].time_s + ops["lm_head"].time_s
    moe = ops["moe"].time_s if "moe" in ops else 0.0
    glue = ops["glue"].time_s
    comp, key, m = parts.composition, gemm_table_key(parts, weight_dtype), np.asarray(tokens, float)
    if comp is not None and comp.applied:   # ops back to back vs each priced alone
        f = comp.factor_at(key, m)
        dense, moe, glue = dense * f, moe * f, glue * f
    if comp is not None and key != "bf16" and "moe" not in ops and not (comp.applied and key in comp.factor):
        # what a dense layer of this weight dtype costs back to back beyond a bf16 layer (fp8: each GEMM's
        # activation quantised in the step, not in the isolated rows). An MoE model's layer term is measured on
        # whole layers run back to back (ops/moe_dispatch.py), which hold their quantisation already.
        f = comp.over_bf16_at(key, m)
        dense, glue = dense * f, glue * f
    gemm = dense + moe
    for k in ("moe_dispatch", "mla_glue"):       # measured inside whole steps already: no composition factor
        if k in ops:
            glue = glue + ops[k].time_s
    return StepTerms(gemm_s=gemm, glue_s=glue, comm_s=ops["allreduce"].time_s,
                     gemm_dtype=gemm_table_key(parts, weight_dtype), kv_append_s=ops["kv_append"].time_s)
