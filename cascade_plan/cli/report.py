"""Commands that write files: plot and report."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated, Optional

import typer

from cascade_plan.cli.common import (BackendOpt, Bf16TflopsOpt, CalibrationOpt, ForceOpt, HardwareOpt,
                                     HbmBandwidthOpt, IdealOpt, L2Opt, MemoryOpt, UncalibratedOpt, with_what_if)
from cascade_plan.errors import InputError

DEFAULT_COMPARE = "a100-80gb,h100-sxm,h200,b200,mi300x"
KINDS = ("heatmap", "steps", "bytes", "hardware")

OutOpt = Annotated[Path, typer.Option("--out", help="Folder to write into (created if missing).")]
CompareOpt = Annotated[str, typer.Option(
    "--compare-hardware", help="Comma-separated GPUs for the side-by-side plot and table ('' for none).")]


def _hardware_list(spec: str):
    from cascade_plan.inputs.hardware import load_hardware

    return [load_hardware(h.strip()) for h in spec.split(",") if h.strip()]


def _analyse(scn, params, compare_hw):
    """Everything a report section needs, computed without writing anything."""
    from cascade_plan.render import breakeven_report as br
    from cascade_plan.cost.capacity import capacity
    from cascade_plan.engine.engine_gate import engine_view
    from cascade_plan.cost.estimate import estimate
    from cascade_plan.inputs.grid_spec import parse_axis
    from cascade_plan.calibration.params_select import select_params
    from cascade_plan.render.report import WorkloadReport

    est = estimate(scn, params)
    groups, suffix = br.workload_axes(scn)
    prefix_axis = parse_axis(br.DEFAULT_PREFIX_AXIS, "--prefix")
    batch_axis = parse_axis(br.DEFAULT_BATCH_AXIS, "--batch")
    be = br.run_breakeven(scn, params, prefix_axis, batch_axis, [suffix], groups)

    # Other GPUs: each with its own shipped calibration when there is one (same backend), else defaults.
    hw_ests = []
    for h in compare_hw:
        other = dataclasses.replace(scn, hardware=h)
        p = params if params.mode == "ideal" else select_params(False, other, None, None, False,
                                                                 params.mode == "default")
        hw_ests.append(estimate(other, p))
    backend_ests = []
    if params.mode == "calibrated":
        from cascade_plan.calibration.probe_calibration import load_probe, params_from_probe

        probe = load_probe(Path(params.source))
        backends = probe.fitted["kv_dtypes"].get(scn.kv_dtype) or probe.fitted["kv_dtypes"]["bf16"]
        backend_ests = [estimate(scn, params_from_probe(probe, b, scn.kv_dtype, scn.hardware, scn.model))
                        for b in backends]
        backend_ests.append(estimate(scn, select_params(True)))
    return WorkloadReport(est=est, cap=capacity(scn, flat=est.flat), engine=engine_view(est), breakeven=be,
                          hardware_estimates=hw_ests, backend_estimates=backend_ests)


def _plots(r, folder: Path, base: Path, kinds) -> dict[str, str]:
    from cascade_plan.render import plots
    from cascade_plan.render.report import rel

    est = r.est
    out: dict[str, str] = {}
    name = f"{est.scenario.model.id} on {est.scenario.hardware.id}"
    if "heatmap" in kinds:
        paths = plots.plot_speedup_heatmap(r.breakeven.sweep, f"Cascade speedup: {name}", folder / "speedup-heatmap")
        out["Speedup over shared-prefix length x group size, breakeven contour"] = rel(paths[0], base)
    if "steps" in kinds:
        out["Step time over the run"] = rel(plots.plot_step_times(est, folder / "step-times")[0], base)
    if "bytes" in kinds:
        out["Bytes per decode step"] = rel(plots.plot_bytes_per_step(est, folder / "bytes-per-step")[0], base)
    if "hardware" in kinds and r.hardware_estimates:
        out["The same workload across GPUs"] = rel(
            plots.plot_hardware_comparison(r.hardware_estimates, folder / "hardware")[0], base)
    return out


def plot(
    workload: Annotated[Path, typer.Argument(help="Workload YAML.", show_default=False)],
    out: OutOpt = Path("plots"),
    kind: Annotated[Optional[list[str]], typer.Option(
        "--kind", help="Which plots: heatmap, steps, bytes, hardware (repeat; default all).")] = None,
    hardware: HardwareOpt = None,
    compare_hardware: CompareOpt = DEFAULT_COMPARE,
    ideal: IdealOpt = False,
    calibration: CalibrationOpt = None,
    backend: BackendOpt = None,
    force: ForceOpt = False,
    uncalibrated: UncalibratedOpt = False,
    hbm_bandwidth: HbmBandwidthOpt = None,
    memory: MemoryOpt = None,
    bf16_tflops: Bf16TflopsOpt = None,
    l2: L2Opt = None,
) -> None:
    """Plots for one workload, PNG and SVG: speedup heatmap with the breakeven contour, step time over
    the run, bytes per step, and the workload across GPUs.

    Example: cascade-plan plot rl-rollouts-64 --out plots/
    """
    from cascade_plan.calibration.params_select import select_params
    from cascade_plan.render.report import slug
    from cascade_plan.inputs.workload import load_scenario

    kinds = kind or list(KINDS)
    bad = [k for k in kinds if k not in KINDS]
    if bad:
        raise InputError(f"--kind: unknown plot {bad[0]!r}: use {', '.join(KINDS)}")
    scn = with_what_if(load_scenario(workload, hardware), hbm_bandwidth, memory, bf16_tflops, l2)
    r = _analyse(scn, select_params(ideal, scn, calibration, backend, force, uncalibrated),
                 _hardware_list(compare_hardware))
    folder = out / slug(scn.name)
    written = _plots(r, folder, out, kinds)
    for caption, path in written.items():
        typer.echo(f"{out / path}  ({caption}; .svg beside it)")


def report(
    workloads: Annotated[Optional[list[Path]], typer.Argument(
        help="Workload YAMLs or shipped workload names (default: every shipped workload).", show_default=False)] = None,
    out: OutOpt = Path("report"),
    hardware: HardwareOpt = None,
    compare_hardware: CompareOpt = DEFAULT_COMPARE,
    ideal: IdealOpt = False,
    calibration: CalibrationOpt = None,
    backend: BackendOpt = None,
    force: ForceOpt = False,
    uncalibrated: UncalibratedOpt = False,
    no_plots: Annotated[bool, typer.Option("--no-plots", help="Skip the images (faster).")] = False,
    hbm_bandwidth: HbmBandwidthOpt = None,
    memory: MemoryOpt = None,
    bf16_tflops: Bf16TflopsOpt = None,
    l2: L2Opt = None,
) -> None:
    """A self-contained markdown report (report.md, images beside it) for one or more workloads:
    inputs, the arithmetic, per-step and run results, breakeven, memory, vLLM's choice, verdict.

    Examples:

      cascade-plan report --out report/                       (every shipped workload)

      cascade-plan report my-workload.yaml rl-rollouts-64 --out report/
    """
    from rich.progress import Progress

    from cascade_plan.atomic import write_text_atomic
    from cascade_plan.calibration.params_select import select_params
    from cascade_plan.render.report import build_report, slug
    from cascade_plan.inputs.workload import load_scenario

    if not workloads:
        from cascade_plan.inputs.workload_catalog import builtin_workloads

        workloads = list(builtin_workloads().values())
    scns = [with_what_if(load_scenario(w, hardware), hbm_bandwidth, memory, bf16_tflops, l2) for w in workloads]        # every input checked before anything is written
    chosen = [select_params(ideal, s, calibration, backend, force, uncalibrated) for s in scns]
    compare_hw = _hardware_list(compare_hardware)
    names = [slug(s.name) for s in scns]
    if len(set(names)) != len(names):
        raise InputError("two workloads have the same name; give each a distinct `name:`")
    reports = []
    with Progress(transient=True) as progress:
        task = progress.add_task("analysing and plotting", total=len(scns))
        for scn, name, params in zip(scns, names, chosen):
            r = _analyse(scn, params, compare_hw)
            if not no_plots:
                r.plots = _plots(r, out / name, out, KINDS)
            reports.append(r)
            progress.advance(task)
    path = write_text_atomic(out / "report.md", build_report(reports))
    typer.echo(f"wrote {path} ({len(reports)} workload{'s' if len(reports) > 1 else ''}"
               f"{'' if no_plots else ', plots beside it'})")
