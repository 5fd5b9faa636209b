"""`breakeven`: where cascade starts to pay, over a sweep of shared-prefix length x sequences per group."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from cascade_plan.cli.common import (
    HardwareOpt,
    ModelOpt,
    ReserveOpt,
    WorkloadArg,
    scenario_from_options,
)
from cascade_plan.cli.option_bundles import (
    Deployment,
    TableOutput,
    calibration_options,
    deployment_options,
    table_output_options,
    what_if_options,
)
from cascade_plan.errors import InputError
from cascade_plan.inputs.choices import ParamsChoice, WhatIf
from cascade_plan.inputs.limits import MAX_COPIES, MAX_GRID_POINTS
from cascade_plan.render.console import make_console
from cascade_plan.version import __version__

if TYPE_CHECKING:  # pragma: no cover
    from cascade_plan.inputs.workload import Scenario


def _scenario(workload: Path | None, model: str | None, hardware: str | None, deployment: Deployment) -> Scenario:
    if workload is None and model is None:
        raise InputError("give a workload file or --model (e.g. --model llama-3-8b --hardware h100-sxm)")
    if workload is not None:
        return scenario_from_options(workload, model=None, hardware=hardware, prefix=None, samples=None,
                                     output_tokens=None, **deployment.as_kwargs())
    return scenario_from_options(None, model=model, hardware=hardware, prefix=1, samples=1, output_tokens=1,
                                 **deployment.as_kwargs())


@calibration_options
@what_if_options
@table_output_options
@deployment_options
def breakeven(
    workload: WorkloadArg = None,
    model: ModelOpt = None,
    hardware: HardwareOpt = None,
    deployment: Deployment = Deployment(),
    prefix: Annotated[str, typer.Option("--prefix", help="Shared-prefix axis in tokens: START:STOP:log[:N], "
                                        "START:STOP:lin[:N], START:STOP:STEP, or a list 512,4096.")] = "64:65536:log",
    batch: Annotated[str, typer.Option("--batch",
                                       help="Sequences-per-group axis (same forms as --prefix).")] = "1:512:log",
    suffix: Annotated[Optional[str], typer.Option(
        "--suffix", help="Private tokens each sequence reads this step (own prompt + generated so far). Default: the "
                         "workload's middle decode step, or 128.")] = None,
    groups: Annotated[Optional[int], typer.Option("--groups", min=1, max=MAX_COPIES,
                                                  help="Prompt groups in the batch (default: the "
                                                  "workload's sibling groups, or 1).")] = None,
    choice: ParamsChoice = ParamsChoice(),
    reserve: ReserveOpt = 0.10,
    what_if: WhatIf = WhatIf(),
    output: TableOutput = TableOutput(),
) -> None:
    """Where cascade starts to pay: sweep shared-prefix length x sequences per group (x suffix length).

    Prints, for each group size, the shortest shared prefix at which cascade beats per-sequence
    attention; for each prefix length, the smallest group at which it does; and the speedup at
    representative points. With measured kernels the win can appear, vanish and reappear along an
    axis, so each axis is scanned (the grid's own values included) and every crossing bisected: a cell
    reads '1,009' (wins from there on), '1,009 to 4,096' (loses again above) or '..., from 9,001' (wins
    again), exact to the token, and both tables agree with every grid point.

    Examples:

      cascade-plan breakeven rl-rollouts-64

      cascade-plan breakeven --model llama-3-70b --hardware h200 --tp 8 --prefix 256:65536:log --batch 1:512:log --suffix 0,512,4096
    """  # noqa: E501
    from cascade_plan.cost.breakeven import run_breakeven, workload_axes
    from cascade_plan.inputs.grid_spec import parse_axis
    from cascade_plan.planning.params_select import select_params
    from cascade_plan.render import breakeven_report as br

    scn = what_if.apply(_scenario(workload, model, hardware, deployment))
    wl_groups, wl_suffix = workload_axes(scn) if workload is not None else (1, 128)
    p_axis = parse_axis(prefix, "--prefix")
    n_axis = parse_axis(batch, "--batch", minimum=1)
    s_axis = parse_axis(suffix, "--suffix") if suffix else parse_axis(str(wl_suffix), "--suffix")
    points = p_axis.size * n_axis.size * s_axis.size
    if points > MAX_GRID_POINTS:
        raise InputError(f"the sweep has {points:,} points (--prefix x --batch x --suffix); cascade-plan sweeps "
                         f"at most "
                         f"{MAX_GRID_POINTS:,}: use fewer values per axis")
    params = select_params(scn, choice)
    res = run_breakeven(scn, params, p_axis, n_axis, s_axis, groups or wl_groups, reserve)

    def tables() -> None:
        br.render(res, make_console())

    output.emit(lambda: br.to_json(res, __version__), lambda: br.to_csv(res), tables)
