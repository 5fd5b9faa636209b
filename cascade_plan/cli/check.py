"""`check`: capacity gates for CI (the gate itself is serving/capacity_gate.py); exit 0 when every check
holds, 1 when one fails, 2 for bad input."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from cascade_plan.cli.common import AttentionBackendOpt, HardwareOpt, JsonOpt, ReserveOpt, print_json
from cascade_plan.cli.option_bundles import calibration_options, what_if_options
from cascade_plan.envelope import envelope
from cascade_plan.errors import InputError
from cascade_plan.inputs.choices import ParamsChoice, WhatIf
from cascade_plan.inputs.limits import MAX_SEQUENCES, MAX_THRESHOLD


@calibration_options
@what_if_options
def check(
    workloads: Annotated[list[Path], typer.Argument(help="Workload YAMLs; thresholds from their `checks:` section "
                                                    "and/or the options below (options win).", show_default=False)],
    hardware: HardwareOpt = None,
    min_run_speedup: Annotated[Optional[float], typer.Option(help="Fail below this run speedup (x).", min=0,
                                                             max=MAX_THRESHOLD)] = None,
    max_step_s: Annotated[Optional[float], typer.Option(help="Fail if the slowest decode step, in the mode the "
                                                        "planner picks, exceeds this many seconds.", min=0,
                                                        max=MAX_THRESHOLD)] = None,
    max_run_s: Annotated[Optional[float], typer.Option(help="Fail if the whole decode, in the picked mode, exceeds "
                                                       "this many seconds.", min=0, max=MAX_THRESHOLD)] = None,
    max_tpot_ms: Annotated[Optional[float], typer.Option(help="Fail if the mean decode step (TPOT), in the picked "
                                                         "mode, in waves that fit in memory, exceeds this many ms.",
                                                         min=0, max=MAX_THRESHOLD)] = None,
    max_rollout_s: Annotated[Optional[float], typer.Option(help="Fail if the decode of the whole batch, in waves of "
                                                           "sibling groups that fit in memory, in the picked mode, "
                                                           "exceeds this many seconds.", min=0,
                                                           max=MAX_THRESHOLD)] = None,
    min_sequences_fit: Annotated[Optional[int], typer.Option(help="Fail if fewer sequences of this shape fit in "
                                                             "GPU memory.", min=1, max=MAX_SEQUENCES)] = None,
    cascade_chosen: Annotated[Optional[bool], typer.Option("--cascade-chosen/--no-cascade-chosen", help="Require "
                                                           "that the planner picks cascade (or not).")] = None,
    vllm_uses_cascade: Annotated[Optional[bool], typer.Option("--vllm-uses-cascade/--no-vllm-uses-cascade", help=
                                                              "Require vLLM (opted in, on its default attention "
                                                              "backend for the GPU or "
                                                              "--attention-backend) to use cascade (or not).")] = None,
    reserve: ReserveOpt = 0.10,
    junit: Annotated[Optional[str], typer.Option("--junit", help="Write JUnit XML here.", show_default=False)] = None,
    markdown: Annotated[Optional[str], typer.Option(
        "--markdown", show_default=False,
        help="Append a markdown summary to this file (e.g. \"$GITHUB_STEP_SUMMARY\", which expects appends). An empty "
             "path, as that variable is outside GitHub Actions, writes no summary and says so on stderr.")] = None,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace the --markdown file instead of appending "
                                            "to it.")] = False,
    choice: ParamsChoice = ParamsChoice(),
    margin: Annotated[bool, typer.Option("--margin", help="Judge min_run_speedup and cascade_chosen on the run "
                                         "speedup less the measured error of its numbers (the verdict's margin: "
                                         "speedup / (1 + error)).")] = False,
    what_if: WhatIf = WhatIf(),
    attention_backend: AttentionBackendOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Capacity gates for CI: exit 0 when every check holds, 1 when one fails, 2 for bad input.

    Thresholds come from each workload's `checks:` section and/or these options (options win). A workload
    without any is listed as unchecked, not failed; exit 2 only when nothing at all is checked.

    Examples:

      cascade-plan check rl-rollouts-64 short-prompt-long-reasoning      (their shipped `checks:` sections)

      cascade-plan check rl-rollouts-64 --min-run-speedup 2 --min-sequences-fit 128 --junit checks.xml --markdown "$GITHUB_STEP_SUMMARY"
    """  # noqa: E501
    from cascade_plan.inputs.workload import load_scenario
    from cascade_plan.outputs import check_output_file, write_files_together
    from cascade_plan.render.check_report import NO_CHECKS, junit_xml, markdown_summary
    from cascade_plan.serving.capacity_gate import run_gate

    junit_path, markdown_path = _output_path(junit, "--junit"), _output_path(markdown, "--markdown")
    if junit_path:
        check_output_file(junit_path, "--junit")
    if markdown_path:
        check_output_file(markdown_path, "--markdown")
    # all input checked before anything is written
    loaded = [what_if.apply(load_scenario(w, hardware)) for w in workloads]
    thresholds = {"min_run_speedup": min_run_speedup, "max_step_s": max_step_s, "max_run_s": max_run_s,
                  "max_tpot_ms": max_tpot_ms, "max_rollout_s": max_rollout_s,
                  "min_sequences_fit": min_sequences_fit, "cascade_chosen": cascade_chosen,
                  "vllm_uses_cascade": vllm_uses_cascade}
    gate = run_gate(loaded, choice, thresholds, reserve, margin, attention_backend)
    results, unchecked, label, failed = gate.results, gate.unchecked, gate.label, gate.failed
    # Both paths were checked before any work; the files are written together (a markdown summary that
    # is appended to, as GitHub's step summary is, goes last).
    outputs = [(junit_path, junit_xml(results, unchecked).encode())] if junit_path else []
    summary = markdown_summary(results, label, unchecked) if markdown_path else None
    if markdown_path and summary is not None and overwrite:
        outputs.append((markdown_path, summary.encode()))
    write_files_together(outputs)
    if markdown_path and summary is not None and not overwrite:
        _write_markdown(markdown_path, summary, overwrite)
    if json_out:
        print_json(envelope({"mode": gate.mode, "numbers": label,
                             "passed": not failed, "hardware": gate.hardware,
                             "workloads": {name: [{"name": c.name, "passed": c.passed, "measured": c.measured,
                                                   "threshold": c.threshold, "text": c.text} for c in r]
                                           for name, r in results.items()},
                             "without_checks": unchecked, "cheapest_passing": gate.suggestions}))
    else:
        for name, checks_ in results.items():
            for c in checks_:
                typer.echo(f"{'PASS' if c.passed else 'FAIL'}  {name}  {c.text}")
            if name in gate.suggestions:
                typer.echo(f"      {name}: cheapest configuration that passes (cascade-plan capacity): "
                           f"{gate.suggestions[name]}")
        for name in unchecked:
            typer.echo(f"SKIP  {name}  {NO_CHECKS}")
        skipped = f", {len(unchecked)} workload{'s' if len(unchecked) > 1 else ''} without checks" if unchecked else ""
        typer.echo(f"{gate.checked - failed} passed, {failed} failed{skipped} (numbers: {label})")
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
