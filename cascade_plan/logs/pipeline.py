"""From log files to an Analysis: scan (DuckDB or Spark), locate malformed records, price steps."""

from __future__ import annotations

from typing import Callable

from cascade_plan.cost.cost_params import CostParams
from cascade_plan.errors import InputError
from cascade_plan.inputs.workload import Scenario
from cascade_plan.logs.analysis import Analysis, analyze_tables
from cascade_plan.logs.bad_lines import BadRecord, locate
from cascade_plan.logs.duck_reader import LogTables, read_logs
from cascade_plan.logs.engine_share import engine_share
from cascade_plan.logs.log_costs import price_steps
from cascade_plan.logs.sources import LogFile
from cascade_plan.logs.spark_job import read_logs_spark
from cascade_plan.logs.vllm_logged import logged_gate

ENGINES = ("duckdb", "spark")


def scan(files: list[LogFile], engine: str = "duckdb", progress: Callable[[str, float], None] | None = None,
         memory_limit: str = "1GB", threads: int | None = None) -> LogTables:
    if engine == "duckdb":
        return read_logs(files, memory_limit=memory_limit, threads=threads, progress=progress)
    if engine == "spark":
        return read_logs_spark(files)
    raise InputError(f"--engine: unknown engine {engine!r}: use {' or '.join(ENGINES)}")


def run_analysis(files: list[LogFile], scn: Scenario, params: CostParams, *, engine: str = "duckdb",
                 strict: bool = False, show_bad: int = 10, progress: Callable[[str, float], None] | None = None,
                 memory_limit: str = "1GB", threads: int | None = None) -> Analysis:
    """Scan, then (strict) fail on the first malformed record or (lenient) list up to `show_bad`."""
    tables = scan(files, engine, progress, memory_limit, threads)
    bad: list[BadRecord] = []
    by_path = {f.path: f for f in files}
    for path, _, malformed in tables.files:
        if malformed and (strict or len(bad) < show_bad):
            found = locate(by_path[path], tables.forms[path], limit=1 if strict else show_bad - len(bad))
            if strict:
                first = found[0] if found else None
                raise InputError(f"{first.reason} (--strict: {malformed} malformed record(s) in this file)"
                                 if first else f"{malformed} malformed record(s) (--strict)",
                                 file=path, line=first.line if first else None)
            bad += found
    if tables.steps == 0:
        raise InputError("no valid decode step in the log(s)" + (f" ({sum(m for *_, m in tables.files)} malformed)"
                                                                  if tables.files else ""), file=files[0].path)
    a = analyze_tables(tables, price_steps(tables, scn, params), engine_share(tables, scn), bad)
    if engine == "duckdb":            # vLLM's own gate input, where the vLLM logger wrote it
        a.vllm_logged = logged_gate(files, tables, scn, a.engine.common_prefix_tokens)
    return a
