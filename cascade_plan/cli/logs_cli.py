"""Commands over batch logs: analyze (a day of logs -> the seed's verdict) and simulate-log."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Callable, Optional

import typer

from cascade_plan.cli.common import (
    HardwareOpt,
    JsonOpt,
    WorkloadArg,
    print_json,
)
from cascade_plan.cli.model_options import ModelArg, WorkloadOpt, scenario_and_params
from cascade_plan.cli.option_bundles import Deployment, calibration_options, deployment_options
from cascade_plan.errors import InputError
from cascade_plan.inputs import limits
from cascade_plan.inputs.choices import ParamsChoice
from cascade_plan.render.console import make_console

if TYPE_CHECKING:  # pragma: no cover
    from cascade_plan.inputs.workload import Scenario
    from cascade_plan.logs.analysis import Analysis


@calibration_options
@deployment_options
def analyze(
    logs: Annotated[list[str], typer.Argument(help="Log files or globs (quote them): .jsonl/.csv/.parquet, optionally "
                                              ".gz/.zst. Format: docs/logs.md.", show_default=False)],
    model: ModelArg = None,
    hardware: HardwareOpt = None,
    workload: WorkloadOpt = None,
    deployment: Deployment = Deployment(),
    choice: ParamsChoice = ParamsChoice(),
    strict: Annotated[bool, typer.Option("--strict", help="Stop at the first malformed record (exit 2).")] = False,
    show_bad: Annotated[int, typer.Option("--show-bad", min=0, max=limits.MAX_SHOW_BAD,
                                          help="Malformed records to list by file and line (all are counted).")] = 10,
    plots: Annotated[Optional[Path], typer.Option("--plots", help="Write distribution plots (PNG + SVG) here.")] = None,
    workload_out: Annotated[Optional[Path], typer.Option(
        "--workload-out", help="Write the workload tree that best summarises the log as a workload YAML.")] = None,
    engine: Annotated[str, typer.Option("--engine", help="duckdb (in-process; default) or spark (the `spark` "
                                        "extra; local mode or spark-submit, see docs/logs.md).")] = "duckdb",
    memory_limit: Annotated[str, typer.Option("--memory-limit",
                                              help="DuckDB's memory limit (it spills beyond).")] = "1GB",
    threads: Annotated[Optional[int], typer.Option("--threads", min=1, max=limits.MAX_THREADS,
                                                   help="DuckDB threads (default: all cores).")] = None,
    json_out: JsonOpt = False,
) -> None:
    """From a day of batch logs to a verdict: how much sharing the engines saw, and whether cascade
    attention would have paid.

    Reads per-step batch logs (one record per decode step per replica: docs/logs.md), prints the
    distributions of batch size, sibling count, shared-prefix and private tokens per replica and
    overall, the share of steps and of decode time where cascade pays under the current model and
    calibration, and the projected decode-time saving over the whole log.

    Examples:

      cascade-plan analyze 'logs/2026-11-29/*.jsonl.zst' --model llama-3-8b --hardware h200 --plots out/

      cascade-plan analyze steps.parquet --workload workloads/rl-rollouts-64.yaml --workload-out summary.yaml --json

      cascade-plan simulate-log rl-rollouts-64 --out sim.jsonl && cascade-plan analyze sim.jsonl --model llama-3-8b
    """
    from cascade_plan.logs.pipeline import ENGINES, run_analysis
    from cascade_plan.logs.sources import expand

    if engine not in ENGINES:
        raise InputError(f"--engine: unknown engine {engine!r}: use {' or '.join(ENGINES)}")
    memory_limit = check_memory_limit(memory_limit)
    _check_outputs(plots, workload_out)
    scn, params = scenario_and_params(workload, model, hardware, deployment, choice)
    files = expand(logs)
    a = run_analysis(files, scn, params, engine=engine, strict=strict, show_bad=show_bad,
                     progress=None if json_out else _progress(), memory_limit=memory_limit, threads=threads)
    written = _write_outputs(a, scn, logs, plots, workload_out)
    scenario_line = (f"{scn.model.id} on {scn.hardware.id}, KV {scn.kv_dtype}, weights {scn.weight_dtype}, TP {scn.tp}")
    if json_out:
        from cascade_plan.logs.analysis import to_json

        print_json(to_json(a, {"model": scn.model.id, "hardware": scn.hardware.id,
                               "kv_dtype": scn.kv_dtype, "weight_dtype": scn.weight_dtype, "tp": scn.tp,
                               "mode": params.mode, "numbers": params.label, "engine": engine,
                               "written": [str(w) for w in written]}))
        return
    from cascade_plan.render.render_logs import render_analysis

    render_analysis(a, make_console(), params.label, scenario_line, [str(w) for w in written])


MEMORY_LIMIT_BYTES = (16 * 2**20, 2**50)          # 16 MiB (DuckDB needs some) .. 1 PiB


def check_memory_limit(text: str) -> str:
    """--memory-limit (500MB, 4GiB, 1.5TB, 1PB) as the KiB figure DuckDB is given; one error line for anything
    else, or a size outside 16 MiB .. 1 PiB (DuckDB itself knows no PB, and fails on huge numbers)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(B|bytes|[KMGTP]i?B)\s*", text, re.IGNORECASE)
    if not m:
        raise InputError(f"--memory-limit: {text!r} is not a size: write e.g. 500MB, 4GB or 2GiB")
    unit = m.group(2).upper()
    power = "BKMGTP".index(unit[0]) if unit not in ("B", "BYTES") else 0
    n = float(m.group(1)) * ((1024 if "I" in unit else 1000) ** power)
    lo, hi = MEMORY_LIMIT_BYTES
    if not lo <= n <= hi:
        raise InputError(f"--memory-limit: {text.strip()} is outside 16MiB .. 1PiB")
    return f"{int(n // 1024)}KiB"


def _check_outputs(plots: Path | None, workload_out: Path | None) -> None:
    """Both outputs checked before the scan: a bad second path never leaves the first one written."""
    from cascade_plan.outputs import check_output_dir, check_output_file

    if workload_out is not None:
        check_output_file(workload_out, "--workload-out")
    if plots is not None:
        check_output_dir(plots, "--plots")


def _progress() -> Callable[[str, float], None] | None:
    """A progress bar on stderr (only on a terminal) fed by the scan's progress callback."""
    if not sys.stderr.isatty():
        return None
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

    bar = Progress(TextColumn("scanning logs {task.description}"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
                   TimeElapsedColumn(), console=Console(stderr=True), transient=True)
    tasks: dict[str, TaskID] = {}

    def update(label: str, pct: float) -> None:
        if not tasks:
            bar.start()
        if label not in tasks:
            tasks[label] = bar.add_task(label, total=100)
        bar.update(tasks[label], completed=pct)
        if pct >= 100:
            bar.stop()

    return update


def _write_outputs(a: Analysis, scn: Scenario, logs: list[str], plots: Path | None,
                   workload_out: Path | None) -> list[Path]:
    written: list[Path] = []
    if workload_out:
        from cascade_plan.atomic import write_text_atomic
        from cascade_plan.logs.summary_tree import summary_tree, workload_yaml

        tree, notes = summary_tree(a.tables)
        written.append(write_text_atomic(workload_out, workload_yaml(
            tree, notes, name=Path(workload_out).stem, source=", ".join(logs), model=scn.model.id,
            hardware=scn.hardware.id, kv_dtype=scn.kv_dtype, weight_dtype=scn.weight_dtype, tp=scn.tp)))
    if plots:
        from cascade_plan.render.log_plots import plot_log_distributions

        written += plot_log_distributions(a, f"{', '.join(logs)}: {a.tables.steps:,} decode steps, {scn.model.id} on "
                                          f"{scn.hardware.id}", Path(plots) / "log-distributions")
    return written


def simulate_log(
    workload: WorkloadArg,
    out: Annotated[Path, typer.Option("--out", help="Log to write (JSON Lines; .gz compresses).")],
    replica: Annotated[str, typer.Option("--replica", help="Replica id written into every record.")] = "r0",
    step_s: Annotated[float, typer.Option("--step-s", min=0, max=1e6,
                                          help="Seconds between steps' timestamps.")] = 0.01,
) -> None:
    """Write the batch log a workload would produce: every decode step, per-sequence form.

    `analyze` on it reproduces `estimate`'s run speedup for the workload.

    Example: cascade-plan simulate-log rl-rollouts-64 --out sim.jsonl
    """
    from cascade_plan.inputs.workload import load_scenario
    from cascade_plan.logs.simulate import check_log_size, write_log
    from cascade_plan.outputs import check_output_file

    if workload is None:
        raise InputError("give a workload YAML (see workloads/)")
    if not str(out).endswith((".jsonl", ".jsonl.gz", ".ndjson", ".ndjson.gz")):
        raise InputError("--out: name the log .jsonl or .jsonl.gz")
    check_output_file(out, "--out")
    scn = load_scenario(workload)
    check_log_size(scn.tree, str(workload))
    n = write_log(scn.tree, out, replica, step_s)
    typer.echo(f"wrote {out}: {n} decode steps of {scn.name}")
