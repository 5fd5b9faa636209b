"""The non-attention part of a decode step: its ops (cost/ops/registry.py), each priced alone, composed into
the step. Ops priced alone from isolated rows (COMPOSED "dense" or "moe") take the calibration's composition
factor (what they cost back to back vs alone); an fp8 dense layer also what it costs beyond a bf16 one; ops
measured inside whole steps (COMPOSED None) are taken as they are. `step_terms` sums them into the three terms
every step total reads (GEMMs, glue, all-reduce). Pure numpy.
"""

from __future__ import annotations

from types import ModuleType

import msgspec
import numpy as np

from cascade_plan.cost.ops.base import OpCost
from cascade_plan.cost.ops.context import StepContext
from cascade_plan.cost.ops.gemm import gemm_table_key, layer_gemms  # noqa: F401  (re-exported: callers import them here)
from cascade_plan.cost.ops.registry import ops as op_modules
from cascade_plan.cost.step_parts import StepParts

ACTIVATION_BYTES = 2.0   # bf16 activations: all-reduce messages and GEMM inputs/outputs
TERMS = ("gemm", "glue", "comm")


class StepTerms(msgspec.Struct, frozen=True):
    """Seconds per decode step, arrays over the step grid."""

    gemm_s: np.ndarray       # dense GEMMs + lm_head + MoE experts
    glue_s: np.ndarray
    comm_s: np.ndarray
    gemm_dtype: str          # the efficiency table used ("bf16" or "fp8")
    # The K/V append when the calibration's per-sequence decode already includes it (AIConfigurator's):
    # the per-sequence step must not add it again, the cascade step (probe kernels) must add it once.
    kv_append_s: np.ndarray | float = 0.0
    # every non-attention op as the step runs it (composition factors applied), in the registry's order
    ops: tuple[OpCost, ...] = ()


def priced_ops(ctx: StepContext) -> list[tuple[ModuleType, OpCost]]:
    """(module, its cost alone) of every op the context prices, in the registry's order."""
    out: list[tuple[ModuleType, OpCost]] = []
    for module in op_modules():
        op = module.cost(ctx)
        if op is not None:
            out.append((module, op))
    return out


def step_ops(model, tp: int, weight_dtype: str, tokens, parts: StepParts, hbm_bytes_per_s: float,
             flop_per_s: float) -> dict[str, OpCost]:
    """Every non-attention operation of decode steps of `tokens` sequences (one token each), priced alone, by
    name."""
    ctx = StepContext(model, tp, weight_dtype, tokens, hbm_bytes_per_s, flop_per_s, parts)
    return {op.name: op for _, op in priced_ops(ctx)}


def composed(priced: list, parts: StepParts | None, weight_dtype: str, tokens) -> StepTerms:
    """The non-attention ops of `priced` ((module, OpCost)) as the step runs them, and their terms. Each term
    sums its composed ops first (one factor on their sum, as fitted) and then the others, in the registry's order.
    """
    rest = [(mod, op) for mod, op in priced if getattr(mod, "TERM") != "attention"]
    f = f2 = None
    if parts is not None:
        comp, key, m = parts.composition, gemm_table_key(parts, weight_dtype), np.asarray(tokens, float)
        if comp is not None and comp.applied:   # ops back to back vs each priced alone
            f = comp.factor_at(key, m)
        has_moe = any(getattr(mod, "COMPOSED") == "moe" for mod, _ in rest)
        if comp is not None and key != "bf16" and not has_moe and not (comp.applied and key in comp.factor):
            # what a dense layer of this weight dtype costs back to back beyond a bf16 layer (fp8: each GEMM's
            # activation quantised in the step, not in the isolated rows). An MoE model's layer term is measured
            # on whole layers run back to back (ops/moe_dispatch.py), which hold their quantisation already.
            f2 = comp.over_bf16_at(key, m)
    factors = {"dense": [x for x in (f, f2) if x is not None], "moe": [] if f is None else [f], None: []}
    totals = {}
    for term in TERMS:
        pieces = []
        for kind in ("dense", "moe"):
            mine = [op.time_s for mod, op in rest if getattr(mod, "TERM") == term and getattr(mod, "COMPOSED") == kind]
            if mine:
                pieces.append(_scaled(_sum(mine), factors[kind]))
        pieces += [op.time_s for mod, op in rest if getattr(mod, "TERM") == term and getattr(mod, "COMPOSED") is None]
        totals[term] = _sum(pieces) if pieces else np.zeros_like(np.asarray(tokens, float))
    ops = tuple(msgspec.structs.replace(op, time_s=_scaled(op.time_s, factors[getattr(mod, "COMPOSED")]))
                for mod, op in rest)
    kv = next((op.time_s for _, op in priced if op.name == "kv_append"), 0.0)
    return StepTerms(gemm_s=totals["gemm"], glue_s=totals["glue"], comm_s=totals["comm"],
                     gemm_dtype=gemm_table_key(parts, weight_dtype) if parts is not None else weight_dtype,
                     kv_append_s=kv, ops=ops)


def _sum(xs: list):
    out = xs[0]
    for x in xs[1:]:
        out = out + x
    return out


def _scaled(x, factors: list):
    for f in factors:
        x = x * f
    return x


def step_terms(model, tp: int, weight_dtype: str, tokens, parts: StepParts, hbm_bytes_per_s: float,
               flop_per_s: float) -> StepTerms:
    """GEMM, glue and communication seconds of decode steps of `tokens` sequences (one token each)."""
    ctx = StepContext(model, tp, weight_dtype, tokens, hbm_bytes_per_s, flop_per_s, parts)
    return composed(priced_ops(ctx), parts, weight_dtype, tokens)
