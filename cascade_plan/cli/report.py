"""Commands that write files: plot and report."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Callable, Collection, Optional

import typer

from cascade_plan.cli.common import AttentionBackendOpt, HardwareOpt, ReserveOpt
from cascade_plan.cli.option_bundles import calibration_options, what_if_options
from cascade_plan.errors import InputError
from cascade_plan.inputs.choices import ParamsChoice, WhatIf
from cascade_plan.inputs.workload_catalog import builtin_workloads
from cascade_plan.render.plot_jobs import KINDS, default_workers, plot_tasks, render_plots

if TYPE_CHECKING:  # pragma: no cover
    from cascade_plan.cost.cost_params import CostParams
    from cascade_plan.inputs.hardware import HardwareProfile
    from cascade_plan.inputs.workload import Scenario
    from cascade_plan.serving.workload_analysis import WorkloadReport

DEFAULT_COMPARE = "a100-80gb,h100-sxm,h200,b200,mi300x"
SvgOpt = Annotated[bool, typer.Option("--svg", help="Write an SVG beside every PNG (vector, for papers and "
                                      "slides; doubles the drawing time).")]
JobsOpt = Annotated[Optional[int], typer.Option(
    "--jobs", "-j", min=1, help="Processes that draw plots in parallel (default: one per CPU core).",
    show_default=False)]

OutOpt = Annotated[Path, typer.Option("--out", help="Folder to write into (created if missing).")]
CompareOpt = Annotated[str, typer.Option(
    "--compare-hardware", help="Comma-separated GPUs for the side-by-side plot and table ('' for none).")]


def _analyse(scn: Scenario, params: CostParams, compare_hw: list[HardwareProfile], choice: ParamsChoice,
             reserve: float = 0.10, attention_backend: str | None = None) -> WorkloadReport:
    """The report's analysis of one workload, on the report's default breakeven axes."""
    from cascade_plan.cost.breakeven import DEFAULT_BATCH_AXIS, DEFAULT_PREFIX_AXIS
    from cascade_plan.inputs.grid_spec import parse_axis
    from cascade_plan.serving.workload_analysis import analyse_workload, with_own_gpu

    return analyse_workload(scn, params, with_own_gpu(scn, compare_hw), choice,
                            parse_axis(DEFAULT_PREFIX_AXIS, "--prefix"), parse_axis(DEFAULT_BATCH_AXIS, "--batch"),
                            reserve, attention_backend)


def _hardware_list(spec: str) -> list[HardwareProfile]:
    from cascade_plan.inputs.hardware import load_hardware

    return [load_hardware(h.strip()) for h in spec.split(",") if h.strip()]


def _plots(jobs: list[tuple[WorkloadReport, Path]], base: Path, kinds: Collection[str], svg: bool, workers: int,
           on_done: Callable[[], None] | None = None) -> list[dict[str, str]]:
    """Render every (analysed workload, folder) job's plots; {caption: path relative to base} per job."""
    from cascade_plan.render.report import rel

    written = render_plots(jobs, kinds, ("png", "svg") if svg else ("png",), workers, on_done)
    return [{caption: rel(path, base) for caption, path in w.items()} for w in written]


@calibration_options
@what_if_options
def plot(
    workload: Annotated[Path, typer.Argument(help="Workload YAML.", show_default=False)],
    out: OutOpt = Path("plots"),
    kind: Annotated[Optional[list[str]], typer.Option(
        "--kind", help="Which plots: heatmap, steps, bytes, hardware (repeat; default all).")] = None,
    hardware: HardwareOpt = None,
    compare_hardware: CompareOpt = DEFAULT_COMPARE,
    choice: ParamsChoice = ParamsChoice(),
    reserve: ReserveOpt = 0.10,
    svg: SvgOpt = False,
    jobs: JobsOpt = None,
    what_if: WhatIf = WhatIf(),
) -> None:
    """Plots for one workload, PNG (and SVG with --svg): speedup heatmap with the breakeven contour, step
    time over the run, bytes per step, and the workload across GPUs.

    Example: cascade-plan plot rl-rollouts-64 --out plots/
    """
    from cascade_plan.inputs.workload import load_scenario
    from cascade_plan.planning.params_select import select_params
    from cascade_plan.render.report import slug

    kinds = kind or list(KINDS)
    bad = [k for k in kinds if k not in KINDS]
    if bad:
        raise InputError(f"--kind: unknown plot {bad[0]!r}: use {', '.join(KINDS)}")
    from cascade_plan.outputs import check_output_dir

    check_output_dir(out, "--out")
    scn = what_if.apply(load_scenario(workload, hardware))
    r = _analyse(scn, select_params(scn, choice), _hardware_list(compare_hardware), choice, reserve)

    written = _plots([(r, out / slug(scn.name))], out, kinds, svg, jobs or default_workers())[0]
    for caption, path in written.items():
        typer.echo(f"{out / path}  ({caption}{'; .svg beside it' if svg else ''})")


@calibration_options
@what_if_options
def report(
    workloads: Annotated[Optional[list[Path]], typer.Argument(
        help="Workload YAMLs or shipped workload names (default: every shipped workload).", show_default=False)] = None,
    out: OutOpt = Path("report"),
    hardware: HardwareOpt = None,
    compare_hardware: CompareOpt = DEFAULT_COMPARE,
    choice: ParamsChoice = ParamsChoice(),
    no_plots: Annotated[bool, typer.Option("--no-plots", help="Skip the images (faster).")] = False,
    reserve: ReserveOpt = 0.10,
    svg: SvgOpt = False,
    jobs: JobsOpt = None,
    what_if: WhatIf = WhatIf(),
    attention_backend: AttentionBackendOpt = None,
) -> None:
    """A self-contained markdown report (report.md, images beside it) for one or more workloads:
    inputs, the arithmetic, per-step and run results, breakeven, memory, vLLM's choice, verdict.

    Examples:

      cascade-plan report --out report/                       (every shipped workload)

      cascade-plan report rl-rollouts-64 beam-search --out report/ --svg          (or your own workload files)
    """
    from rich.progress import Progress

    from cascade_plan.atomic import write_text_atomic
    from cascade_plan.inputs.workload import load_scenario
    from cascade_plan.planning.params_select import select_params
    from cascade_plan.render.report import build_report, slug
    from cascade_plan.report_folder import ReportFolder

    if not workloads:
        workloads = list(builtin_workloads().values())
    # Every input is checked before anything is written.
    scns = [what_if.apply(load_scenario(w, hardware)) for w in workloads]
    chosen = [select_params(s, choice) for s in scns]
    compare_hw = _hardware_list(compare_hardware)
    names = [slug(s.name) for s in scns]
    if len(set(names)) != len(names):
        raise InputError("two workloads have the same name; give each a distinct `name:`")
    target = ReportFolder(out)                                     # checks --out before any work
    try:
        reports = [_analyse(scn, params, compare_hw, choice, reserve, attention_backend)
                   for scn, params in zip(scns, chosen)]
        # Everything is written into a temporary folder beside --out and swapped in whole at the end:
        # a failure or an interrupt leaves the previous report as it was, never a mix of two runs.
        with target as folder:
            if not no_plots:
                jobs_ = [(r, folder / name) for r, name in zip(reports, names)]
                # No auto-refresh: its thread would be running when the pool forks its workers (unsafe); the bar is
                # redrawn as each plot finishes instead.
                with Progress(transient=True, auto_refresh=False) as progress:
                    task = progress.add_task("drawing plots", total=len(plot_tasks(jobs_, KINDS)))

                    def advance() -> None:
                        progress.advance(task)
                        progress.refresh()

                    for r, written in zip(reports, _plots(jobs_, folder, KINDS, svg, jobs or default_workers(),
                                                          advance)):
                        r.plots = written
            write_text_atomic(folder / "report.md", build_report(reports))
    finally:
        target.release()                                          # also when the analysis fails
    path = out / "report.md"
    typer.echo(f"wrote {path} ({len(reports)} workload{'s' if len(reports) > 1 else ''}"
               f"{'' if no_plots else ', plots beside it'})")
