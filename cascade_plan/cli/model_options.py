"""For commands that need a model and a GPU but no sharing tree (analyze, route, rl): take them
from --model/--hardware/dtypes/--tp or from a workload file, and pick the cost parameters."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from cascade_plan.cli.common import scenario_from_options
from cascade_plan.errors import InputError

ModelArg = Annotated[Optional[str], typer.Option("--model", help="Model preset id or Hugging Face config.json "
                                                 "(or take it from --workload).")]
WorkloadOpt = Annotated[Optional[Path], typer.Option("--workload", help="Take model, hardware, dtypes and TP from this "
                                                     "workload YAML (its tree is ignored).")]


def scenario_and_params(workload, model, hardware, kv_dtype, weight_dtype, tp, choice):
    from cascade_plan.calibration.params_select import select_params

    if (workload is None) == (model is None):
        raise InputError("give --model (e.g. --model llama-3-8b --hardware h200) or --workload FILE, one of them")
    scn = scenario_from_options(workload, model=model, hardware=hardware, prefix=None if workload else 1,
                                samples=None if workload else 1, output_tokens=None if workload else 1,
                                kv_dtype=kv_dtype, weight_dtype=weight_dtype, tp=tp)
    return scn, select_params(scn, choice)
