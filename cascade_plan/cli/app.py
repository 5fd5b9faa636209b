"""The `cascade-plan` command line: each command loads, calls the library, renders."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import msgspec
import typer

from cascade_plan.cli.common import (
    TP_FLAGS,
    HardwareOpt,
    JsonOpt,
    KvCacheDtypeChoice,
    KvDtypeOpt,
    ModelOpt,
    MoeRoutingOpt,
    ReserveOpt,
    WorkloadArg,
    handles_input_errors,
    kv_dtype_of,
    print_json,
    refuse_replacing_non_calibration,
    scenario_from_options,
)
from cascade_plan.cli.interrupts import interruptible
from cascade_plan.cli.narrow_help import NarrowSafeCommand
from cascade_plan.cli.one_line_errors import OneLineErrorGroup
from cascade_plan.cli.option_bundles import (
    Deployment,
    QuickWorkload,
    calibration_options,
    deployment_options,
    quick_workload_options,
    what_if_options,
)
from cascade_plan.envelope import envelope
from cascade_plan.errors import InputError
from cascade_plan.inputs.choices import ParamsChoice, WhatIf
from cascade_plan.render.console import make_console
from cascade_plan.version import __version__
from kernels_probe.options import PROBE_OPTIONS, check_choices

if TYPE_CHECKING:  # pragma: no cover
    from kernels_probe.steps.workload_probe import WorkloadProbePlan

APP_HELP = ("Does shared-prefix (cascade) attention pay for my model, GPU and batch shape, by how much, and where "
            "is the breakeven? Start with `cascade-plan workloads` and `cascade-plan estimate rl-rollouts-64`.")


def new_app() -> typer.Typer:
    return typer.Typer(name="cascade-plan", help=APP_HELP, no_args_is_help=True, add_completion=True,
                       rich_markup_mode="markdown", cls=OneLineErrorGroup,
                       pretty_exceptions_enable=False)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"cascade-plan {__version__}")
        raise typer.Exit()


def _root(version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                                help="Print the version and exit.")] = False) -> None:
    pass


@handles_input_errors
@calibration_options
@what_if_options
@quick_workload_options
@deployment_options
def estimate(
    workload: WorkloadArg = None,
    model: ModelOpt = None,
    hardware: HardwareOpt = None,
    shape: QuickWorkload = QuickWorkload(),
    deployment: Deployment = Deployment(),
    choice: ParamsChoice = ParamsChoice(),
    reserve: ReserveOpt = 0.10,
    what_if: WhatIf = WhatIf(),
    moe_routing: MoeRoutingOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Bytes and time per decode step, per-sequence vs cascade attention, for one workload.

    Shows KV bytes per token, prefix and weight bytes, the step at the first, middle and final decode
    step, the whole run's time and average speedup, and the seed's go/no-go check. The verdict says
    what it rests on: none when the weights or batch do not fit in memory (with what would fit), the
    defaults' measured error when no calibration covers this GPU, a range when the measurements do
    not cover the model's attention shape.

    Examples:

      cascade-plan estimate rl-rollouts-64 --ideal

      cascade-plan estimate --model llama-3-8b --hardware h100-sxm --prefix 4096 --groups 2 --samples 64 --output-tokens 1024

      cascade-plan estimate --model meta-llama/Meta-Llama-3-70B --hardware h100 --tp 8 --prefix 8000 --samples 16 --output-tokens 512

      cascade-plan estimate rl-rollouts-64 --hardware h100 --hbm-bandwidth 4.8 --memory 141GB     (what-if GPU)
    """  # noqa: E501
    from cascade_plan.cost.estimate import to_json
    from cascade_plan.planning.params_select import select_params
    from cascade_plan.planning.verdict_evidence import assess

    scn = scenario_from_options(workload, model=model, hardware=hardware, **shape.as_kwargs(),
                                **deployment.as_kwargs())
    scn = what_if.apply(scn)
    if moe_routing is not None:
        scn = msgspec.structs.replace(scn, moe_routing=moe_routing.value)
    est = assess(scn, select_params(scn, choice), reserve)
    if json_out:
        print_json(to_json(est, __version__))
        return
    from cascade_plan.render.render_estimate import render_estimate

    render_estimate(est, make_console())


@handles_input_errors
def models(
    kv_dtype: Annotated[KvCacheDtypeChoice, typer.Option(
        "--kv-dtype", "--kv-cache-dtype", callback=kv_dtype_of, case_sensitive=False,
        help="KV dtype for the bytes-per-token column (vLLM's fp8_e4m3, fp8_e5m2, "
             "auto too).")] = KvCacheDtypeChoice.bf16,
    weight_dtype: Annotated[KvDtypeOpt, typer.Option(
        "--weight-dtype", help="Weight dtype for the weight-bytes column.")] = KvDtypeOpt.bf16,
    tp: Annotated[int, typer.Option(*TP_FLAGS, min=1, max=64, help="Tensor-parallel degree (bytes are per GPU).")] = 1,
    json_out: JsonOpt = False,
) -> None:
    """List the built-in models with KV bytes per token and weight bytes (per GPU at --tp)."""
    from cascade_plan.render.model_catalog import model_rows, render_models

    rows = model_rows(kv_dtype.value, weight_dtype.value, tp)
    if json_out:
        print_json(envelope({"kv_dtype": kv_dtype.value, "weight_dtype": weight_dtype.value, "tp": tp,
                             "models": rows}))
    else:
        render_models(rows, kv_dtype.value, weight_dtype.value, tp)


@handles_input_errors
def hardware(
    profile: Annotated[Optional[str], typer.Argument(help="Show one profile in full (id or YAML path).")] = None,
    json_out: JsonOpt = False,
) -> None:
    """List the built-in hardware profiles (datasheet peaks with sources), or show one."""
    from cascade_plan.render.model_catalog import hardware_rows, render_hardware

    rows = hardware_rows(profile)
    if json_out:
        print_json(envelope({"hardware": rows}))
    else:
        render_hardware(rows, full=profile is not None)


def _probe_option(name: str) -> Any:
    """The typer option of one of the probe's options (kernels_probe.options: python -m kernels_probe has the
    same names, help, defaults and bounds)."""
    o = PROBE_OPTIONS[name]
    return typer.Option(o.flag, help=o.help, min=o.min, max=o.max)


@handles_input_errors
@quick_workload_options
@deployment_options
def probe(
    out: Annotated[Path, _probe_option("out")],
    quick: Annotated[bool, _probe_option("quick")] = PROBE_OPTIONS["quick"].default,
    backend: Annotated[Optional[list[str]], _probe_option("backend")] = PROBE_OPTIONS["backend"].default,
    page_size: Annotated[int, _probe_option("page_size")] = PROBE_OPTIONS["page_size"].default,
    time_budget: Annotated[Optional[float], _probe_option("time_budget")] = PROBE_OPTIONS["time_budget"].default,
    step: Annotated[bool, _probe_option("step")] = PROBE_OPTIONS["step"].default,
    grid: Annotated[str, _probe_option("grid")] = PROBE_OPTIONS["grid"].default,
    workload: Annotated[Optional[Path], typer.Option(
        "--workload", help="Measure exactly what this workload (file or shipped name) needs on this GPU: its "
                           "attention, GEMM and glue shapes and its first/middle/final whole steps (about 2 minutes "
                           "of measuring, JIT builds apart).")] = None,
    model: ModelOpt = None,
    shape: QuickWorkload = QuickWorkload(),
    deployment: Deployment = Deployment(),
    merge_into: Annotated[Optional[Path], _probe_option("merge_into")] = PROBE_OPTIONS["merge_into"].default,
) -> None:
    """Run real per-sequence and cascade attention kernels on this machine's CUDA GPU and write a
    calibration file (needs the `probe` extra: pip install 'cascade-plan[probe]').

    Examples:

      cascade-plan probe --out cal.json --quick          # ~1 minute of measuring

      cascade-plan probe --out cal.json --step           # full grid + GEMMs, glue, all-reduce, whole steps

      cascade-plan probe --out mine.json --workload rl-rollouts-64 --kv-dtype fp8 --merge-into cal.json
    """
    from cascade_plan.outputs import check_output_file

    check_output_file(out, "--out")          # the arguments first: a bad one is reported before any GPU work
    refuse_replacing_non_calibration(out, "--out")
    bad = check_choices(backend, grid)
    if bad:
        raise InputError(bad)
    if merge_into is not None and not merge_into.is_file():
        raise InputError(f"--merge-into: no such file {str(merge_into)!r}")
    plan = probe_plan_from_options(workload, model=model, **shape.as_kwargs(), **deployment.as_kwargs(),
                                   page_size=page_size)
    try:
        from kernels_probe.environment import missing_requirements
    except ImportError:
        raise InputError("the GPU probe package (kernels_probe) is not installed with this copy of "
                         "cascade-plan") from None
    missing = missing_requirements()
    if missing:
        raise InputError("cannot run the probe: " + "; ".join(missing))
    from kernels_probe.runner import run_probe

    console = make_console()
    doc = run_probe(out, quick=quick, backends=backend, page_size=page_size, console=console,
                    time_budget_s=time_budget, step=step, grid=grid, plan=plan)
    if merge_into is not None:
        from kernels_probe.__main__ import merge_into_file

        merge_into_file(out, merge_into, doc)
    t = doc["notes"]["run_timings_s"]
    console.print(f"measuring {t.get('measuring_s', t['total_s']):.0f} s (JIT builds apart), "
                  f"{t['total_s']:.0f} s in all")
    console.print(f"wrote {out}; next: cascade-plan calibrate {out}")


def probe_plan_from_options(workload: Path | None, *, model: str | None, prefix: int | None, groups: int,
                            samples: int | None, output_tokens: int | None, private_tokens: int,
                            kv_dtype: KvCacheDtypeChoice | None, weight_dtype: KvDtypeOpt | None, tp: int | None,
                            page_size: int = 16) -> WorkloadProbePlan | None:
    """The WorkloadProbePlan of `probe --workload` / `--model ...` (None when neither is given). Bad input
    raises InputError before any GPU work."""
    if workload is None and model is None:
        given = [f for f, v in (("--prefix", prefix), ("--samples", samples), ("--output-tokens", output_tokens),
                                ("--kv-dtype", kv_dtype), ("--weight-dtype", weight_dtype),
                                ("--tp", tp)) if v is not None]
        if given:
            raise InputError(f"{given[0]} describes a workload to probe: give --workload FILE or --model ID with it")
        return None
    from kernels_probe.steps.workload_probe import plan_for_scenario

    scn = scenario_from_options(workload, model=model, hardware=None, prefix=prefix, groups=groups, samples=samples,
                                output_tokens=output_tokens, private_tokens=private_tokens, kv_dtype=kv_dtype,
                                weight_dtype=weight_dtype, tp=tp)
    try:
        return plan_for_scenario(scn, page_size)
    except ValueError as exc:
        raise InputError(f"probe --workload: {exc}", file=scn.source) from None


# name -> (module, function), in help order. Commands that live in their own modules keep this module small.
COMMANDS = [("estimate", "cascade_plan.cli.app"), ("breakeven", "cascade_plan.cli.breakeven"),
            ("compare", "cascade_plan.cli.compare"), ("capacity", "cascade_plan.cli.capacity"),
            ("plot", "cascade_plan.cli.report"),
            ("report", "cascade_plan.cli.report"), ("check", "cascade_plan.cli.check"),
            ("models", "cascade_plan.cli.app"),
            ("workloads", "cascade_plan.cli.workloads"), ("schema", "cascade_plan.cli.workloads"),
            ("hardware", "cascade_plan.cli.app"), ("probe", "cascade_plan.cli.app"),
            ("calibrate", "cascade_plan.cli.calibrate"),
            ("validate", "cascade_plan.cli.calibrate"), ("import-aic", "cascade_plan.cli.aic"),
            ("aic-check", "cascade_plan.cli.aic"),
            ("analyze", "cascade_plan.cli.logs_cli"), ("simulate-log", "cascade_plan.cli.logs_cli"),
            ("route", "cascade_plan.cli.serving_cli"), ("rl", "cascade_plan.cli.serving_cli")]


def _commands(only: str | None = None) -> list:
    out = []
    for name, module in COMMANDS:
        if only is None or name == only:
            fn = getattr(importlib.import_module(module), name.replace("-", "_"))
            out.append(interruptible(fn if getattr(fn, "handles_input_errors", False) else handles_input_errors(fn)))
    return out


def populate(target: typer.Typer, only: str | None = None) -> typer.Typer:
    target.callback()(_root)
    for fn in _commands(only):
        target.command(cls=NarrowSafeCommand)(fn)
    return target


def __getattr__(name: str) -> typer.Typer:
    """`app`, every command registered, built on first use (tests, docs, `typer ... utils docs`): a run of one
    command builds only its own (main), and importing this module registers none, which kept 9 command
    modules and their option decorators out of `estimate`'s start-up."""
    if name == "app":
        globals()["app"] = built = populate(new_app())
        return built
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    # Typer converts every registered command into click objects on each run (~40 ms for all of them
    # here). A run of one known command builds only that one; --help and unknown names get the full app.
    argv = sys.argv[1:]
    name = argv[0] if argv and not argv[0].startswith("-") else None
    if name and name in {n for n, _ in COMMANDS}:
        populate(new_app(), only=name)()
        return
    populate(new_app())()
