"""For commands that need a model and a GPU but no sharing tree (analyze, route, rl): take them
from --model/--hardware/dtypes/--tp or from a workload file, and pick the cost parameters."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from cascade_plan.cli.common import scenario_from_options
from cascade_plan.errors import InputError

if TYPE_CHECKING:  # pragma: no cover
    from cascade_plan.cli.option_bundles import Deployment
    from cascade_plan.cost.cost_params import CostParams
    from cascade_plan.inputs.choices import ParamsChoice
    from cascade_plan.inputs.workload import Scenario

ModelArg = Annotated[Optional[str], typer.Option("--model", help="Model preset id or Hugging Face config.json "
                                                 "(or take it from --workload).")]
WorkloadOpt = Annotated[Optional[Path], typer.Option("--workload", help="Take model, hardware, dtypes and TP from this "
                                                     "workload YAML (its tree is ignored).")]


def scenario_and_params(workload: Path | None, model: str | None, hardware: str | None, deployment: Deployment,
                        choice: ParamsChoice) -> tuple[Scenario, CostParams]:
    from cascade_plan.planning.params_select import select_params

    if (workload is None) == (model is None):
        raise InputError("give --model (e.g. --model llama-3-8b --hardware h200) or --workload FILE, one of them")
    scn = scenario_from_options(workload, model=model, hardware=hardware, prefix=None if workload else 1,
                                samples=None if workload else 1, output_tokens=None if workload else 1,
                                **deployment.as_kwargs())
    return scn, select_params(scn, choice)
