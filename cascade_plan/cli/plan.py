"""Commands over sweeps and several workloads: breakeven, compare, check."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from cascade_plan import __version__
from cascade_plan.cli.common import (
    AttentionBackendOpt,
    BackendOpt,
    Bf16TflopsOpt,
    CalibrationOpt,
    ForceOpt,
    HardwareOpt,
    HbmBandwidthOpt,
    IdealOpt,
    JsonOpt,
    KvDtypeOption,
    L2Opt,
    MemoryOpt,
    ModelOpt,
    ReserveOpt,
    TpOpt,
    UncalibratedOpt,
    WeightDtypeOption,
    WorkloadArg,
    kv_dtype_value,
    print_json,
    scenario_from_options,
    with_what_if,
)
from cascade_plan.errors import InputError
from cascade_plan.inputs.limits import MAX_COPIES, MAX_GRID_POINTS, MAX_SEQUENCES, MAX_THRESHOLD

CsvOpt = Annotated[bool, typer.Option("--csv", help="Print CSV (one row per point) instead of tables.")]


def _scenario(workload, model, hardware, kv_dtype, weight_dtype, tp):
    if workload is None and model is None:
        raise InputError("give a workload file or --model (e.g. --model llama-3-8b --hardware h100-sxm)")
    if workload is not None:
        return scenario_from_options(workload, model=None, hardware=hardware, prefix=None, samples=None,
                                     output_tokens=None, kv_dtype=kv_dtype, weight_dtype=weight_dtype, tp=tp)
    return scenario_from_options(None, model=model, hardware=hardware, prefix=1, samples=1, output_tokens=1,
                                 kv_dtype=kv_dtype, weight_dtype=weight_dtype, tp=tp)


def breakeven(
    workload: WorkloadArg = None,
    model: ModelOpt = None,
    hardware: HardwareOpt = None,
    kv_dtype: KvDtypeOption = None,
    weight_dtype: WeightDtypeOption = None,
    tp: TpOpt = None,
    prefix: Annotated[str, typer.Option("--prefix", help="Shared-prefix axis in tokens: START:STOP:log[:N], "
                                        "START:STOP:lin[:N], START:STOP:STEP, or a list 512,4096.")] = "64:65536:log",
    batch: Annotated[str, typer.Option("--batch", help="Sequences-per-group axis (same forms as --prefix).")] = "1:512:log",
    suffix: Annotated[Optional[str], typer.Option(
        "--suffix", help="Private tokens each sequence reads this step (own prompt + generated so far). Default: the "
                         "workload's middle decode step, or 128.")] = None,
    groups: Annotated[Optional[int], typer.Option("--groups", min=1, max=MAX_COPIES, help="Prompt groups in the batch (default: the "
                                                  "workload's sibling groups, or 1).")] = None,
    ideal: IdealOpt = False,
    calibration: CalibrationOpt = None,
    backend: BackendOpt = None,
    force: ForceOpt = False,
    uncalibrated: UncalibratedOpt = False,
    reserve: ReserveOpt = 0.10,
    hbm_bandwidth: HbmBandwidthOpt = None,
    memory: MemoryOpt = None,
    bf16_tflops: Bf16TflopsOpt = None,
    l2: L2Opt = None,
    json_out: JsonOpt = False,
    csv_out: CsvOpt = False,
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
    """
    from cascade_plan.calibration.params_select import select_params
    from cascade_plan.inputs.grid_spec import parse_axis
    from cascade_plan.render import breakeven_report as br

    scn = with_what_if(_scenario(workload, model, hardware, kv_dtype, weight_dtype, tp), hbm_bandwidth, memory,
                       bf16_tflops, l2)
    wl_groups, wl_suffix = br.workload_axes(scn) if workload is not None else (1, 128)
    p_axis = parse_axis(prefix, "--prefix")
    n_axis = parse_axis(batch, "--batch", minimum=1)
    s_axis = parse_axis(suffix, "--suffix") if suffix else parse_axis(str(wl_suffix), "--suffix")
    points = p_axis.size * n_axis.size * s_axis.size
    if points > MAX_GRID_POINTS:
        raise InputError(f"the sweep has {points:,} points (--prefix x --batch x --suffix); cascade-plan sweeps at most "
                         f"{MAX_GRID_POINTS:,}: use fewer values per axis")
    params = select_params(ideal, scn, calibration, backend, force, uncalibrated)
    res = br.run_breakeven(scn, params, p_axis, n_axis, s_axis, groups or wl_groups, reserve)
    if json_out:
        print_json(br.to_json(res, __version__))
    elif csv_out:
        typer.echo(br.to_csv(res), nl=False)
    else:
        from cascade_plan.render.console import make_console

        br.render(res, make_console())


def compare(
    workload: WorkloadArg = None,
    hardware: Annotated[Optional[str], typer.Option(
        "--hardware", help="Comma-separated hardware profiles to compare (default: the workload's).")] = None,
    kv_dtype: Annotated[Optional[str], typer.Option(
        "--kv-dtype", "--kv-cache-dtype", help="Comma-separated KV dtypes to compare (bf16,fp8,...; vLLM's fp8_e4m3, "
                                               "fp8_e5m2 and auto too).")] = None,
    model: ModelOpt = None,
    prefix: Annotated[Optional[int], typer.Option("--prefix", min=0, help="Without a file: shared prompt tokens.")] = None,
    groups: Annotated[int, typer.Option("--groups", min=1, max=MAX_COPIES, help="Without a file: prompt groups.")] = 1,
    samples: Annotated[Optional[int], typer.Option("--samples", min=1, help="Without a file: sequences per prompt.")] = None,
    output_tokens: Annotated[Optional[int], typer.Option("--output-tokens", min=1, help="Without a file: output tokens.")] = None,
    tp: TpOpt = None,
    ideal: IdealOpt = False,
    backend: BackendOpt = None,
    uncalibrated: UncalibratedOpt = False,
    reserve: ReserveOpt = 0.10,
    hbm_bandwidth: HbmBandwidthOpt = None,
    memory: MemoryOpt = None,
    bf16_tflops: Bf16TflopsOpt = None,
    l2: L2Opt = None,
    json_out: JsonOpt = False,
    csv_out: CsvOpt = False,
) -> None:
    """The same workload across several hardware profiles and/or KV dtypes, side by side.

    Example: cascade-plan compare rl-rollouts-64 --hardware a100-80gb,h100-sxm,h200,b200 --kv-dtype bf16,fp8
    """
    import dataclasses

    from cascade_plan.calibration.params_select import ParamsChoice, params_for_gpu, sources_note
    from cascade_plan.cost.compare import compare_rows, render_compare, rows_csv
    from cascade_plan.inputs.hardware import load_hardware

    base = scenario_from_options(workload, model=model, hardware=None, prefix=prefix, groups=groups, samples=samples,
                                 output_tokens=output_tokens, tp=tp)
    hws = [load_hardware(h.strip()) for h in hardware.split(",")] if hardware else [base.hardware]
    kvs = list(dict.fromkeys(kv_dtype_value(k) for k in kv_dtype.split(","))) if kv_dtype else [base.kv_dtype]
    scns = [with_what_if(dataclasses.replace(base, hardware=h, kv_dtype=k), hbm_bandwidth, memory, bf16_tflops, l2)
            for h in hws for k in kvs]
    choice = ParamsChoice(ideal=ideal, uncalibrated=uncalibrated, backend=backend)
    params = [params_for_gpu(s, choice) for s in scns]          # each GPU's own best source
    from cascade_plan.calibration.verdict_evidence import assess

    rows = compare_rows(scns, params, lambda scn, p: assess(scn, p, reserve))
    note = sources_note([(s.hardware.id, p) for s, p in zip(scns, params)])
    if json_out:
        print_json({"schema_version": 1, "tool_version": __version__, "workload": base.name, "rows": rows,
                    "sources_note": note})
    elif csv_out:
        typer.echo(rows_csv(rows), nl=False)
    else:
        from cascade_plan.render.console import make_console

        console = make_console()
        render_compare(base.name, rows, console)
        if note:
            console.print(f"Note: {note}")


def check(
    workloads: Annotated[list[Path], typer.Argument(help="Workload YAMLs; thresholds from their `checks:` section "
                                                    "and/or the options below (options win).", show_default=False)],
    hardware: HardwareOpt = None,
    min_run_speedup: Annotated[Optional[float], typer.Option(help="Fail below this run speedup (x).", min=0, max=MAX_THRESHOLD)] = None,
    max_step_s: Annotated[Optional[float], typer.Option(help="Fail if the slowest decode step, in the mode the "
                                                        "planner picks, exceeds this many seconds.", min=0, max=MAX_THRESHOLD)] = None,
    max_run_s: Annotated[Optional[float], typer.Option(help="Fail if the whole decode, in the picked mode, exceeds "
                                                       "this many seconds.", min=0, max=MAX_THRESHOLD)] = None,
    min_sequences_fit: Annotated[Optional[int], typer.Option(help="Fail if fewer sequences of this shape fit in "
                                                             "GPU memory.", min=1, max=MAX_SEQUENCES)] = None,
    cascade_chosen: Annotated[Optional[bool], typer.Option("--cascade-chosen/--no-cascade-chosen", help="Require "
                                                           "that the planner picks cascade (or not).")] = None,
    vllm_uses_cascade: Annotated[Optional[bool], typer.Option("--vllm-uses-cascade/--no-vllm-uses-cascade", help=
                                                              "Require vLLM (opted in, on its default attention backend for the GPU or "
                                                              "--attention-backend) to use cascade (or not).")] = None,
    reserve: ReserveOpt = 0.10,
    calibration: CalibrationOpt = None,
    backend: BackendOpt = None,
    force: ForceOpt = False,
    uncalibrated: UncalibratedOpt = False,
    junit: Annotated[Optional[str], typer.Option("--junit", help="Write JUnit XML here.", show_default=False)] = None,
    markdown: Annotated[Optional[str], typer.Option(
        "--markdown", show_default=False,
        help="Append a markdown summary to this file (e.g. \"$GITHUB_STEP_SUMMARY\", which expects appends). An empty "
             "path, as that variable is outside GitHub Actions, writes no summary and says so on stderr.")] = None,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace the --markdown file instead of appending "
                                            "to it.")] = False,
    ideal: IdealOpt = False,
    margin: Annotated[bool, typer.Option("--margin", help="Judge min_run_speedup and cascade_chosen on the run "
                                         "speedup less the measured error of its numbers (the verdict's margin: "
                                         "speedup / (1 + error)).")] = False,
    hbm_bandwidth: HbmBandwidthOpt = None,
    memory: MemoryOpt = None,
    bf16_tflops: Bf16TflopsOpt = None,
    l2: L2Opt = None,
    attention_backend: AttentionBackendOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Capacity gates for CI: exit 0 when every check holds, 1 when one fails, 2 for bad input.

    Thresholds come from each workload's `checks:` section and/or these options (options win). A workload
    without any is listed as unchecked, not failed; exit 2 only when nothing at all is checked.

    Examples:

      cascade-plan check rl-rollouts-64 short-prompt-long-reasoning      (their shipped `checks:` sections)

      cascade-plan check rl-rollouts-64 --min-run-speedup 2 --min-sequences-fit 128 --junit checks.xml --markdown "$GITHUB_STEP_SUMMARY"
    """
    from cascade_plan.calibration.params_select import select_params
    from cascade_plan.calibration.verdict_evidence import assess
    from cascade_plan.cost.capacity import capacity
    from cascade_plan.cost.checks import NO_CHECKS, has_checks, junit_xml, markdown_summary, merge_checks, run_checks
    from cascade_plan.engine.engine_gate import engine_view
    from cascade_plan.inputs.workload import load_scenario
    from cascade_plan.outputs import check_output_file, write_files_together

    junit, markdown = _output_path(junit, "--junit"), _output_path(markdown, "--markdown")
    if junit:
        check_output_file(junit, "--junit")
    if markdown:
        check_output_file(markdown, "--markdown")
    loaded = [with_what_if(load_scenario(w, hardware), hbm_bandwidth, memory, bf16_tflops, l2)
              for w in workloads]       # all input checked before anything is written
    chosen = [select_params(ideal, s, calibration, backend, force, uncalibrated) for s in loaded]
    results, unchecked, hardware_of, labels = {}, [], {}, []
    for scn, params in zip(loaded, chosen):
        checks = merge_checks(scn.checks, min_run_speedup=min_run_speedup, max_step_s=max_step_s,
                              max_run_s=max_run_s, min_sequences_fit=min_sequences_fit,
                              cascade_chosen=cascade_chosen, vllm_uses_cascade=vllm_uses_cascade)
        hardware_of[scn.name] = scn.hardware.id
        if not has_checks(checks):
            unchecked.append(scn.name)
            continue
        est = assess(scn, params, reserve)
        results[scn.name] = run_checks(est, capacity(scn, reserve, est.flat), engine_view(est, attention_backend),
                                       checks, margin)
        labels.append(params.label)
    if not results:
        which = "the workload has no" if len(loaded) == 1 else "none of the workloads has a"
        raise InputError(f"nothing to check: {which} `checks:` section and no threshold option was given "
                         "(see cascade-plan check --help)")
    label = "; ".join(dict.fromkeys(labels))
    mode = ",".join(dict.fromkeys(p.mode for s, p in zip(loaded, chosen) if s.name in results))
    failed = sum(not c.passed for r in results.values() for c in r)
    # Both paths were checked before any work; the files are written together (a markdown summary that
    # is appended to, as GitHub's step summary is, goes last).
    outputs = [(junit, junit_xml(results, unchecked).encode())] if junit else []
    summary = markdown_summary(results, label, unchecked) if markdown else None
    if markdown and overwrite:
        outputs.append((markdown, summary.encode()))
    write_files_together(outputs)
    if markdown and not overwrite:
        _write_markdown(markdown, summary, overwrite)
    if json_out:
        print_json({"schema_version": 1, "tool_version": __version__, "mode": mode, "numbers": label,
                    "passed": not failed, "hardware": hardware_of,
                    "workloads": {name: [{"name": c.name, "passed": c.passed, "measured": c.measured,
                                          "threshold": c.threshold, "text": c.text} for c in r]
                                  for name, r in results.items()},
                    "without_checks": unchecked})
    else:
        for name, checks_ in results.items():
            for c in checks_:
                typer.echo(f"{'PASS' if c.passed else 'FAIL'}  {name}  {c.text}")
        for name in unchecked:
            typer.echo(f"SKIP  {name}  {NO_CHECKS}")
        skipped = f", {len(unchecked)} workload{'s' if len(unchecked) > 1 else ''} without checks" if unchecked else ""
        typer.echo(f"{sum(len(r) for r in results.values()) - failed} passed, {failed} failed{skipped} (numbers: {label})")
    if failed:
        raise typer.Exit(1)


def _output_path(text: str | None, option: str) -> Path | None:
    """An output path; an empty one (`--markdown "$GITHUB_STEP_SUMMARY"` outside GitHub Actions, where the
    variable is unset) means no such file, said once on stderr, so that the same command runs on a laptop."""
    if text is None:
        return None
    if not text.strip():
        typer.echo(f"note: {option} is empty (is $GITHUB_STEP_SUMMARY unset? it is outside GitHub Actions): "
                   f"nothing written for {option}", err=True)
        return None
    return Path(text)


def _write_markdown(path: Path, text: str, overwrite: bool) -> None:
    """GitHub's $GITHUB_STEP_SUMMARY collects what every step appends, so append unless told to overwrite."""
    from cascade_plan.atomic import write_text_atomic

    if overwrite:
        write_text_atomic(path, text)
        return
    try:
        prior = path.stat().st_size if path.exists() else 0
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(("\n" if prior else "") + text)
    except OSError as exc:
        raise InputError(f"cannot append the markdown summary: {exc.strerror}", file=str(path)) from None
