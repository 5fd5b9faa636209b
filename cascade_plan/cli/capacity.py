"""`capacity`: the fewest GPUs (which kind, TP, batch, kernels, KV dtype) that meet a latency or rollout budget,
cascade attention on and off."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Callable, Optional

import msgspec
import typer

from cascade_plan.cli.common import JsonOpt, ModelOpt, ReserveOpt, WorkloadArg, kv_dtype_value, scenario_from_options
from cascade_plan.cli.option_bundles import QuickWorkload, quick_workload_options
from cascade_plan.errors import InputError
from cascade_plan.inputs.limits import MAX_THRESHOLD

if TYPE_CHECKING:  # pragma: no cover
    from cascade_plan.inputs.workload import Scenario
    from cascade_plan.serving.capacity_search import SearchResult

WEIGHT_DTYPES = ("bf16", "fp16", "fp8", "int8", "int4")
TARGETS = "Targets (a candidate meets them all or is ranked below those that do)"
SEARCH = "What to search (comma-separated lists)"


def _items(text: str | None, option: str) -> list[str] | None:
    if text is None:
        return None
    items = [t.strip() for t in text.split(",")]
    if not any(items) or any(not t for t in items):
        raise InputError(f"{option}: an empty list or an empty item in {text!r}; give comma-separated values")
    return list(dict.fromkeys(items))


def _positive(value: float | None, option: str, scale: float = 1.0) -> float | None:
    if value is None:
        return None
    if not value > 0 or value > MAX_THRESHOLD:
        raise InputError(f"{option}: {value:g} is not a positive target (at most {MAX_THRESHOLD:g})")
    return value * scale


def _tps(text: str | None) -> tuple[int, ...] | None:
    items = _items(text, "--tp")
    if items is None:
        return None
    try:
        tps = tuple(int(t) for t in items)
    except ValueError:
        raise InputError(f"--tp: {text!r} is not a list of whole numbers (1,2,4,8)") from None
    bad = [t for t in tps if not 1 <= t <= 64]
    if bad:
        raise InputError(f"--tp: {bad[0]} is outside 1-64")
    return tps


def _progress() -> Callable[[int, int], None] | None:
    """A progress bar on stderr, only on a terminal."""
    import sys

    if not sys.stderr.isatty():
        return None
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn

    bar = Progress(TextColumn("searching configurations"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                   console=Console(stderr=True), transient=True)
    task = None

    def tick(done: int, total: int) -> None:
        nonlocal task
        if task is None:
            bar.start()
            task = bar.add_task("", total=total)
        bar.update(task, completed=done)
        if done == total:
            bar.stop()
    return tick


@quick_workload_options
def capacity(
    workload: WorkloadArg = None,
    model: ModelOpt = None,
    shape: QuickWorkload = QuickWorkload(),
    hardware: Annotated[Optional[str], typer.Option(
        "--hardware", rich_help_panel=SEARCH, show_default=False,
        help="GPUs to search: profile ids, aliases or YAML files. Default: every GPU with a shipped calibration "
             "(`cascade-plan hardware` marks them).")] = None,
    tp: Annotated[Optional[str], typer.Option(
        "--tp", "-tp", "--tensor-parallel-size", rich_help_panel=SEARCH, show_default=False,
        help="Tensor-parallel degrees. Default: 1,2,4,8 where they divide the query heads and the weights "
             "fit.")] = None,
    backend: Annotated[Optional[str], typer.Option(
        "--backend", rich_help_panel=SEARCH, show_default=False,
        help="Kernels: flashinfer, flashinfer-fa2, triton, torch. Default: flashinfer,flashinfer-fa2,triton, each "
             "where the GPU's calibration measured it (else the default efficiencies, labelled uncalibrated).")] = None,
    kv_dtype: Annotated[Optional[str], typer.Option(
        "--kv-dtype", "--kv-cache-dtype", rich_help_panel=SEARCH, show_default=False,
        help="KV cache dtypes (vLLM's fp8_e4m3, fp8_e5m2, auto too). Default: bf16,fp8.")] = None,
    weight_dtype: Annotated[Optional[str], typer.Option(
        "--weight-dtype", rich_help_panel=SEARCH, show_default=False,
        help="Weight dtypes (bf16, fp16, fp8, int8, int4). Default: the workload's.")] = None,
    max_gpus: Annotated[Optional[int], typer.Option(
        "--max-gpus", min=1, max=64, rich_help_panel=SEARCH, show_default=False,
        help="Search no configuration of more GPUs than this.")] = None,
    tpot_ms: Annotated[Optional[float], typer.Option(
        "--tpot-ms", rich_help_panel=TARGETS, show_default=False,
        help="Largest mean decode step (time per output token of each sequence), ms.")] = None,
    worst_step_ms: Annotated[Optional[float], typer.Option(
        "--worst-step-ms", rich_help_panel=TARGETS, show_default=False,
        help="Largest slowest decode step, ms.")] = None,
    rollout_s: Annotated[Optional[float], typer.Option(
        "--rollout-s", rich_help_panel=TARGETS, show_default=False,
        help="Longest decode of the workload's whole batch, waves included, s.")] = None,
    min_tokens_per_s: Annotated[Optional[float], typer.Option(
        "--min-tokens-per-s", rich_help_panel=TARGETS, show_default=False,
        help="Fewest output tokens per second over the whole batch.")] = None,
    reserve: ReserveOpt = 0.10,
    top: Annotated[int, typer.Option("--top", min=1, max=10_000, help="Rows of the ranked table to print.")] = 12,
    plot: Annotated[Optional[Path], typer.Option(
        "--plot", show_default=False,
        help="Write the Pareto frontier (tokens/s per GPU against TPOT, cascade on and off) to this PNG "
             "(.svg: SVG).")] = None,
    json_out: JsonOpt = False,
) -> None:
    """The fewest GPUs (which kind, TP, batch, kernels, KV dtype) that meet a latency or rollout budget, with
    cascade on and off: sharing shortens each step, and with prefix caching frees KV memory so that more
    sibling groups decode at once (fewer waves).

    Every candidate is priced as `estimate` prices it: the workload's batch in waves of whole sibling groups
    that fit in memory after the reserve, the waves run one after another. Ranked: those that meet every
    target first, fewest GPUs, then the most tokens/s per GPU. A candidate priced from the default
    efficiencies meets a target only if its whole measured error range does. Exit 1 when none meets
    (one line names the closest), 2 for bad input.

    Examples:

      cascade-plan capacity rl-rollouts-64 --tpot-ms 12

      cascade-plan capacity deepseek-v3-grpo-tp8 --rollout-s 120 --hardware h200,b200 --plot pareto.png

      cascade-plan capacity --model llama-3-70b --prefix 8000 --groups 8 --samples 16 --output-tokens 512 --tpot-ms 30 -tp 4,8
    """  # noqa: E501
    from cascade_plan.calibration.backends import BACKENDS
    from cascade_plan.inputs.hardware import load_hardware
    from cascade_plan.outputs import check_output_file
    from cascade_plan.serving.capacity_search import SearchSpace, Targets, default_hardware_ids, search

    if plot is not None:
        check_output_file(plot, "--plot")
    targets = Targets(tpot_s=_positive(tpot_ms, "--tpot-ms", 1e-3),
                      worst_step_s=_positive(worst_step_ms, "--worst-step-ms", 1e-3),
                      rollout_s=_positive(rollout_s, "--rollout-s"),
                      min_tokens_per_s=_positive(min_tokens_per_s, "--min-tokens-per-s"))
    backends = _items(backend, "--backend")
    for b in backends or ():
        if b not in BACKENDS:
            raise InputError(f"--backend: unknown backend {b!r}: use one of {', '.join(BACKENDS)}")
    kvs = _items(kv_dtype, "--kv-dtype")
    wds = _items(weight_dtype, "--weight-dtype")
    for w in wds or ():
        if w not in WEIGHT_DTYPES:
            raise InputError(f"--weight-dtype: unknown dtype {w!r}: use one of {', '.join(WEIGHT_DTYPES)}")
    hws = _items(hardware, "--hardware") or default_hardware_ids()
    scn = scenario_from_options(workload, model=model, hardware=None, **shape.as_kwargs())
    space = SearchSpace(hardware=tuple(dict((h.id, h) for h in map(load_hardware, hws)).values()), tps=_tps(tp),
                        backends=tuple(backends) if backends else None,
                        kv_dtypes=tuple(dict.fromkeys(kv_dtype_value(k) for k in kvs)) if kvs else ("bf16", "fp8"),
                        weight_dtypes=tuple(wds) if wds else None, max_gpus=max_gpus, reserve_fraction=reserve)
    result = search(scn, space, targets, progress=None if json_out else _progress())
    if not result.candidates:
        raise InputError("nothing to search: " + ("; ".join(result.notes) or "no configuration of these options"))
    _emit(scn, result, reserve, plot, json_out, top)


def _emit(scn: Scenario, result: SearchResult, reserve: float, plot: Path | None, json_out: bool, top: int) -> None:
    from cascade_plan.cli.common import print_json
    from cascade_plan.envelope import envelope
    from cascade_plan.render.console import make_console
    from cascade_plan.serving.capacity_answer import best_estimate, launch, one_line_answer

    best = result.best
    est = best_estimate(scn, result, best, reserve) if best is not None else None
    how = launch(scn, best, est) if best is not None and est is not None else None
    answer = one_line_answer(result)
    written = []
    if plot is not None:
        from cascade_plan.render.capacity_plot import plot_capacity

        fmt = "svg" if plot.suffix.lower() == ".svg" else "png"
        written = plot_capacity(result, plot.with_suffix(""), (fmt,))
        if written and written[0] != plot:          # a name without .png/.svg: keep the name the user gave
            written[0].replace(plot)
            written = [plot]
    if json_out:
        print_json(envelope({
            "workload": result.workload, "model": result.model,
            "targets": msgspec.structs.asdict(result.targets),
            "candidates": [c.to_json() for c in result.candidates],
            "best": best.to_json() if best is not None else None,
            "answer": answer, "launch": how.to_json() if how is not None else None,
            "notes": result.notes}))
    else:
        from cascade_plan.render.capacity_table import render_answer, render_capacity, render_notes

        console = make_console()
        render_capacity(result, console, top)
        render_answer(answer, how, console)
        render_notes(result.notes, console)
        for p in written:
            console.print(f"wrote {p}")
    if best is None:
        typer.echo(f"error: {answer}", err=True)
        raise typer.Exit(1)
