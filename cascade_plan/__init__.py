"""cascade-plan: does shared-prefix (cascade) attention pay for my model, GPU and batch shape?

The library API is named here and imported on first use, so `import cascade_plan` costs nothing:

    import cascade_plan as cp

    scn = cp.load_scenario("rl-rollouts-64")                  # a workload file or a shipped name
    est = cp.assess(scn, cp.select_params(scn))               # the shipped calibration for its GPU, if any
    est.run_speedup, est.verdict
    cp.estimate_json(est)                                     # the document `estimate --json` prints

Every name in `__all__` is part of the API; the modules behind them are not.
"""

from cascade_plan.version import __version__  # noqa: F401  (a leaf; re-exported as the API's version)

# name -> (module, attribute). Strings only: nothing is imported until a name is used.
_API = {
    # inputs: workloads, models, GPUs, the user's choices, sweep axes
    "Scenario": ("cascade_plan.inputs.workload", "Scenario"),
    "load_scenario": ("cascade_plan.inputs.workload", "load_scenario"),
    "TreeNode": ("cascade_plan.inputs.workload", "TreeNode"),
    "simple_tree": ("cascade_plan.inputs.workload", "simple_tree"),
    "builtin_workloads": ("cascade_plan.inputs.workload_catalog", "builtin_workloads"),
    "load_model": ("cascade_plan.inputs.model_spec", "load_model"),
    "load_hardware": ("cascade_plan.inputs.hardware", "load_hardware"),
    "ParamsChoice": ("cascade_plan.inputs.choices", "ParamsChoice"),
    "WhatIf": ("cascade_plan.inputs.choices", "WhatIf"),
    "parse_axis": ("cascade_plan.inputs.grid_spec", "parse_axis"),
    # cost parameters: ideal, defaults, or a calibration
    "CostParams": ("cascade_plan.cost.cost_params", "CostParams"),
    "IDEAL": ("cascade_plan.cost.cost_params", "IDEAL"),
    "DEFAULT": ("cascade_plan.cost.cost_params", "DEFAULT"),
    "select_params": ("cascade_plan.planning.params_select", "select_params"),
    "load_calibration": ("cascade_plan.calibration.calibration_file", "load_probe"),
    "validate_calibration": ("cascade_plan.calibration.validation", "validate"),
    # the planner's answers
    "Estimate": ("cascade_plan.cost.estimate", "Estimate"),
    "estimate": ("cascade_plan.cost.estimate", "estimate"),
    "assess": ("cascade_plan.planning.verdict_evidence", "assess"),
    "estimate_json": ("cascade_plan.cost.estimate", "to_json"),
    "capacity": ("cascade_plan.cost.capacity", "capacity"),
    "BreakevenResult": ("cascade_plan.cost.breakeven", "BreakevenResult"),
    "run_breakeven": ("cascade_plan.cost.breakeven", "run_breakeven"),
    "analyse_workload": ("cascade_plan.serving.workload_analysis", "analyse_workload"),
    "run_gate": ("cascade_plan.serving.capacity_gate", "run_gate"),
    # bad input, everywhere: one line, with the file, field and line where known
    "InputError": ("cascade_plan.errors", "InputError"),
}

__all__ = ["__version__", *_API]


def __getattr__(name: str):
    try:
        module, attribute = _API[name]
    except KeyError:
        raise AttributeError(f"module 'cascade_plan' has no attribute {name!r}") from None
    import importlib

    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value               # resolved once
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_API))
