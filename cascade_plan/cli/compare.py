"""`compare`: one workload across several hardware profiles and/or KV dtypes, side by side."""

from __future__ import annotations

from typing import Annotated, Optional

import msgspec
import typer

from cascade_plan.cli.common import (
    ModelOpt,
    ReserveOpt,
    TpOpt,
    WorkloadArg,
    kv_dtype_value,
    scenario_from_options,
)
from cascade_plan.cli.option_bundles import TableOutput, calibration_options, table_output_options, what_if_options
from cascade_plan.envelope import envelope
from cascade_plan.inputs.choices import ParamsChoice, WhatIf
from cascade_plan.inputs.limits import MAX_COPIES
from cascade_plan.render.console import make_console


@calibration_options(only=("ideal", "backend", "uncalibrated"))      # each GPU takes its own calibration
@what_if_options
@table_output_options
def compare(
    workload: WorkloadArg = None,
    hardware: Annotated[Optional[str], typer.Option(
        "--hardware", help="Comma-separated hardware profiles to compare (default: the workload's).")] = None,
    kv_dtype: Annotated[Optional[str], typer.Option(
        "--kv-dtype", "--kv-cache-dtype", help="Comma-separated KV dtypes to compare (bf16,fp8,...; vLLM's fp8_e4m3, "
                                               "fp8_e5m2 and auto too).")] = None,
    model: ModelOpt = None,
    prefix: Annotated[Optional[int], typer.Option("--prefix", min=0,
                                                  help="Without a file: shared prompt tokens.")] = None,
    groups: Annotated[int, typer.Option("--groups", min=1, max=MAX_COPIES, help="Without a file: prompt groups.")] = 1,
    samples: Annotated[Optional[int], typer.Option("--samples", min=1,
                                                   help="Without a file: sequences per prompt.")] = None,
    output_tokens: Annotated[Optional[int], typer.Option("--output-tokens", min=1,
                                                         help="Without a file: output tokens.")] = None,
    tp: TpOpt = None,
    choice: ParamsChoice = ParamsChoice(),
    reserve: ReserveOpt = 0.10,
    what_if: WhatIf = WhatIf(),
    output: TableOutput = TableOutput(),
) -> None:
    """The same workload across several hardware profiles and/or KV dtypes, side by side.

    Example: cascade-plan compare rl-rollouts-64 --hardware a100-80gb,h100-sxm,h200,b200 --kv-dtype bf16,fp8
    """
    from cascade_plan.cost.compare import compare_rows
    from cascade_plan.inputs.hardware import load_hardware
    from cascade_plan.planning.params_select import params_for_gpu, sources_note
    from cascade_plan.render.compare_table import render_compare, rows_csv

    base = scenario_from_options(workload, model=model, hardware=None, prefix=prefix, groups=groups, samples=samples,
                                 output_tokens=output_tokens, tp=tp)
    hws = [load_hardware(h.strip()) for h in hardware.split(",")] if hardware else [base.hardware]
    kvs = list(dict.fromkeys(kv_dtype_value(k) for k in kv_dtype.split(","))) if kv_dtype else [base.kv_dtype]
    scns = [what_if.apply(msgspec.structs.replace(base, hardware=h, kv_dtype=k)) for h in hws for k in kvs]
    params = [params_for_gpu(s, choice) for s in scns]          # each GPU's own best source
    from cascade_plan.planning.verdict_evidence import assess

    rows = compare_rows(scns, params, lambda scn, p: assess(scn, p, reserve))
    note = sources_note([(s.hardware.id, p) for s, p in zip(scns, params)])

    def tables() -> None:
        console = make_console()
        render_compare(base.name, rows, console)
        if note:
            console.print(f"Note: {note}")

    output.emit(lambda: envelope({"workload": base.name, "rows": rows, "sources_note": note}),
                lambda: rows_csv(rows), tables)
