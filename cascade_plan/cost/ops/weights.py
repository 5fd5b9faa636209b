"""The seed's weights term, where the calibration has no step parts (ideal mode): every parameter read once per
step (cost/step_shape.py `weight_bytes_per_gpu`), 2 FLOP per multiply-add, one roofline at the GEMM kernels'
efficiencies plus their fixed cost per layer. With step parts the GEMMs are priced op by op (ops/gemm.py,
ops/lm_head.py, ops/moe.py) and this op is absent."""

from __future__ import annotations

from cascade_plan.cost.ops.base import OpCost
from cascade_plan.cost.ops.context import BOTH, StepContext
from cascade_plan.cost.roofline import roofline_s
from cascade_plan.cost.step_shape import gemm_flops_per_gpu, weight_bytes_per_gpu

NAME, MODES, TERM, COMPOSED = "weights", BOTH, "gemm", None


def cost(ctx: StepContext) -> OpCost | None:
    if ctx.parts is not None or ctx.params is None:
        return None
    b = weight_bytes_per_gpu(ctx.model, ctx.weight_dtype, ctx.tp, ctx.tokens)
    f = gemm_flops_per_gpu(ctx.model, ctx.tp, ctx.tokens)
    k = ctx.params.gemm
    t = roofline_s(b, f, ctx.hbm_bytes_per_s, ctx.flop_per_s, k) + ctx.model.num_layers * k.overhead_s
    return OpCost(name=NAME, bytes=b, flops=f, time_s=t,
                  source=f"{ctx.params.mode}: weight bytes and FLOP, one roofline")
