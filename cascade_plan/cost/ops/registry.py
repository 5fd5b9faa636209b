"""Every operation of a decode step, one module each, in the order a step lists them. Each module has

    NAME: str              the op's key (OpCost.name, the JSON's and the step table's)
    MODES: tuple[str, ...] the steps it belongs to: per_sequence, cascade (ops/context.py)
    TERM: str              the step total it adds to: "gemm", "glue", "comm" or "attention"
    COMPOSED: str | None   "dense" or "moe": priced alone, so the calibration's composition factor (ops back to
                           back vs alone) applies to it (cost/step_terms.py); None: measured in place already
    cost(ctx: StepContext) -> OpCost | None   None where the op does not exist for this model or calibration

A new op is one module in cost/ops/ and one line in OP_MODULES (tests/test_op_registry.py holds every module
there to this interface, and every module of cost/ops/ with a `cost(ctx)` to being listed)."""

from __future__ import annotations

from functools import cache
from importlib import import_module
from types import ModuleType

OP_MODULES = (
    "gemm",
    "lm_head",
    "moe",
    "moe_dispatch",
    "mla_glue",
    "glue",
    "kv_append",
    "allreduce",
    "weights",
    "decode",
    "cascade_prefix",
    "cascade_suffix",
    "cascade_merge",
)


@cache
def ops() -> tuple[ModuleType, ...]:
    """The op modules of OP_MODULES, imported on first use."""
    return tuple(import_module(f"cascade_plan.cost.ops.{name}") for name in OP_MODULES)
