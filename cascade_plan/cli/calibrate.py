"""Commands over calibration files: calibrate (fit) and validate (accuracy on held-out points)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from cascade_plan.cli.common import JsonOpt, dumps_json, print_json, refuse_replacing_non_calibration
from cascade_plan.envelope import envelope
from cascade_plan.errors import InputError
from cascade_plan.render.console import make_console
from cascade_plan.resources import data_dir
from cascade_plan.units import fmt_bytes_binary

if TYPE_CHECKING:  # pragma: no cover
    from cascade_plan.calibration.calibration_file import ProbeData


def _window_cell(k: dict) -> str:
    if not k.get("l2_hit_max"):
        return ""
    if k.get("l2_window_bytes") is None:
        up_to = k.get("l2_measured_up_to_bytes")
        return f"none to {fmt_bytes_binary(up_to)}" if up_to else "none"
    return fmt_bytes_binary(k["l2_window_bytes"])


def l2_explanation(k: dict, l2_bytes: float) -> str | None:
    """The L2 parameters of per-sequence decode over shared pages in physical terms."""
    if not k.get("l2_hit_max"):
        return None
    share = (f"per-sequence decode over shared prefix pages gets {k['l2_hit_max']:.0%} of the siblings' re-reads "
             f"without HBM traffic (they still stream from L2 at {k['l2_bytes_per_s'] / 1e12:.1f} TB/s)")
    if k.get("l2_window_bytes") is None:
        up_to = k.get("l2_measured_up_to_bytes") or 0.0
        return (f"{share}, with no fall up to {fmt_bytes_binary(up_to)} of shared prefix per layer "
                f"({up_to / l2_bytes:.1f}x the {fmt_bytes_binary(l2_bytes)} L2): siblings read each page within "
                "moments of each other, so the reuse is temporal and needs no whole layer's prefix in L2. "
                "The planner keeps the share beyond the measured range (not measured there).")
    return (f"{share}, falling as {fmt_bytes_binary(k['l2_window_bytes'])} / (shared prefix per layer) beyond "
            f"that size ({k['l2_window_bytes'] / l2_bytes:.1f}x the {fmt_bytes_binary(l2_bytes)} L2).")


def filled_explanation(k: dict) -> str | None:
    """The batch-filled launch of a decode fit in words (None: the fit has none)."""
    if not k.get("filled_rows"):
        return None
    speed = (f"{k['filled_gain']:.2f}x faster than its roofline below that" if k["filled_gain"] != 1.0
             else "no faster than its roofline below that (the rows show no gain)")
    return (f"per-sequence decode of a batch that fills the GPU alone ({k['filled_rows']:,} sequence x KV head rows "
            f"or more, each of more than {k['filled_min_tokens']:,} tokens) runs unsplit {speed}, over whole "
            f"{k['filled_tile_tokens']}-token tiles (the suffix pass likewise)")


def page_blocks_explanation(kernels: dict) -> str | None:
    """Whether the per-sequence decode over shared pages is priced with page blocks, in words (None: no blocks in
    its rows, or not the probe's own kernel)."""
    rule = kernels.get("page_blocks")
    if rule:
        group = rule["tune"].get("decode_page_group")
        tau = (kernels.get("decode_shared") or {}).get("program_token_s") or 0.0
        busiest = (f"; a block's first program streams the shared run and then each sequence's private tokens alone, "
                   f"{tau * 1e9:.1f} ns per token of the busiest program on top of the bandwidth bounds" if tau else "")
        return (f"per-sequence decode over shared pages reads a block of up to {group} sibling sequences' shared pages "
                f"once (the probe's launch rule at {rule['sm_count']} SMs gives every row's recorded launch): the fit "
                f"and the planner take those tokens out of its HBM, L2 and compute terms{busiest}")
    return "; ".join(kernels.get("notes") or []) or None


def calibrate(
    probe_file: Annotated[Path, typer.Argument(help="Calibration JSON written by `cascade-plan probe`.",
                                               show_default=False)],
    out: Annotated[Optional[Path], typer.Option("--out",
                                                help="Write here instead of updating PROBE_FILE in place.")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Fit the cost model's kernel parameters per backend (bandwidth and FLOP efficiencies, fixed
    costs, latency of unsplit rows, L2 reuse of shared pages, an efficiency surface over size and
    rows) on the training part of the probe grid, and write them into the calibration file's
    `fitted` section. The held-out part is what `validate` scores."""
    import numpy as np
    from rich.console import Console
    from rich.table import Table

    from cascade_plan.atomic import write_text_atomic
    from cascade_plan.calibration.calibration_file import load_probe
    from cascade_plan.calibration.file_validation import check_fitted
    from cascade_plan.calibration.probe_fit import calibrate as fit_all
    from cascade_plan.calibration.row_provenance import mixed_version_lines
    from cascade_plan.outputs import check_output_file

    target = check_output_file(out, "--out") if out else probe_file
    if out:
        refuse_replacing_non_calibration(out, "--out")
    probe = load_probe(probe_file)
    with Console(stderr=True).status("fitting kernels..."), np.errstate(all="ignore"):
        try:
            fitted = fit_all(probe)
        except (np.linalg.LinAlgError, ValueError, ZeroDivisionError) as exc:
            raise InputError(f"cannot fit the measurements ({exc}); nothing written", file=str(probe_file)) from None
    check_fitted(fitted, str(probe_file))
    if not fitted["kv_dtypes"]:
        raise InputError("too few measurements to fit any backend (each kernel kind needs 6 training points): "
                         "run the full probe grid, not --quick", file=str(probe_file))
    doc = {**probe.doc, "fitted": fitted}     # the file as read (every field kept), with its new fits
    if probe.steps and probe.hardware_id:
        # the fits' measured speedup errors on whole steps, which every verdict's margin reads
        from cascade_plan.calibration.calibration_file import ProbeData
        from cascade_plan.inputs.hardware import load_hardware
        from cascade_plan.planning.speedup_margin import measured_speedup_errors

        with np.errstate(all="ignore"):
            fitted["speedup_errors"] = measured_speedup_errors(ProbeData(probe.path, doc),
                                                               load_hardware(probe.hardware_id))
    write_text_atomic(target, dumps_json(doc, indent=1) + "\n")
    if json_out:
        print_json(envelope({"written": str(target),
                             "device": probe.device_name, "fitted": fitted}))
        return
    t = Table(title=f"Fitted on {probe.device_name} (training subset; {fitted['holdout_rule']})", title_justify="left")
    for col in ("KV", "backend", "kernel", "n", "GB/s", "TFLOP/s", "fixed µs", "ns/row", "ns/token", "L2 hit",
                "L2 window", "train med err"):
        t.add_column(col, justify="left" if col in ("KV", "backend", "kernel") else "right")
    for kv, per in fitted["kv_dtypes"].items():
        for backend, kernels in per.items():
            for kind, k in kernels.items():
                if not isinstance(k, dict) or "n_train" not in k:     # not a kernel's fit (page_blocks: a rule)
                    continue
                t.add_row(kv, backend, kind, str(k["n_train"]), f"{k['bw_bytes_per_s'] / 1e9:,.0f}",
                          f"{k['flop_per_s'] / 1e12:,.0f}", f"{k['overhead_s'] * 1e6:.1f}", f"{k['row_s'] * 1e9:.2f}",
                          f"{k['token_latency_s'] * 1e9:.3f}", f"{k['l2_hit_max']:.2f}", _window_cell(k),
                          f"{k['train_median_ape']:.1%}")
    make_console().print(t)
    for kv, per in fitted["kv_dtypes"].items():
        for backend, kernels in per.items():
            line = l2_explanation(kernels.get("decode_shared") or {}, probe.l2_bytes)
            if line:
                typer.echo(f"{kv} {backend}: {line}")
    for kv, per in fitted["kv_dtypes"].items():
        for backend, kernels in per.items():
            line = page_blocks_explanation(kernels)
            if line:
                typer.echo(f"{kv} {backend}: {line}")
    for kv, per in fitted["kv_dtypes"].items():
        for backend, kernels in per.items():
            line = filled_explanation(kernels.get("decode_dup") or {})
            if line:
                typer.echo(f"{kv} {backend}: {line}")
    for kv, per in fitted["kv_dtypes"].items():
        for backend, kernels in per.items():
            if kernels.get("prefix_suffix_overlap"):
                typer.echo(f"{kv} {backend}: prefix and suffix passes overlap {kernels['prefix_suffix_overlap']:.0%} "
                           "(0% = one after the other, 100% = fully concurrent)")
    for line in mixed_version_lines(probe.doc):
        typer.echo(f"warning: {line}")
    typer.echo(f"wrote {target}")


def validate(
    calibration: Annotated[Path, typer.Argument(help="A calibrated file (after `cascade-plan calibrate`), or the "
                                                     "name of "
                                                     "a shipped one (see `cascade-plan hardware`).",
                                                show_default=False)],
    plots: Annotated[Optional[Path], typer.Option("--plots", help="Write the predicted-vs-measured scatter and the "
                                                  "error-by-region heatmap into this folder.")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Predicted vs measured on the held-out points: median, 90th-percentile and max absolute
    percentage error per kernel and for the cascade-vs-per-sequence speedup; how often the model
    picks the faster mode, and how often vLLM's heuristic would have. With whole-step rows (probe
    --step): every measured decode step predicted per backend (attention + GEMMs + glue + all-reduce),
    the per-step and per-workload run speedups, and the step targets.

    Where both a probe file and one imported from AIConfigurator exist for the GPU (the H200), it also
    cross-checks them kernel by kernel and on the shipped workloads; for an imported file that is all
    it shows.

    Examples:

      cascade-plan validate h200-probe-2026-12-01.json

      cascade-plan validate h200-aic-vllm.json --json
    """
    from cascade_plan.calibration.calibration_file import load_probe
    from cascade_plan.calibration.validation import validate as run_validate

    if plots:
        from cascade_plan.outputs import check_output_dir

        check_output_dir(plots, "--plots")
    probe = load_probe(_shipped_or_given(calibration))
    if not probe.fitted.get("kv_dtypes"):
        raise InputError("no fitted parameters: run `cascade-plan calibrate` on this file first", file=str(calibration))
    cross = _crosscheck_for(probe)
    if probe.source_kind == "aic":
        if cross is None:
            raise InputError(f"imported from AIConfigurator and no probe calibration of {probe.hardware_id} ships to "
                             "cross-check it against (only the H200 has one)", file=str(calibration))
        if json_out:
            print_json(envelope({"calibration": str(calibration),
                                 "crosscheck": cross}))
            return
        from cascade_plan.render.crosscheck_table import render_crosscheck

        render_crosscheck(cross, make_console())
        return
    res = run_validate(probe)
    from cascade_plan.calibration.step_validation import validate_steps
    from cascade_plan.inputs.hardware import load_hardware

    hw = load_hardware(probe.hardware_id) if probe.hardware_id else None
    steps = validate_steps(probe, hw) if hw is not None else None
    if steps is not None and hw is not None:         # the MoE / MLA + MoE steps, apart from the dense ones
        from cascade_plan.calibration.moe_step_validation import validate_moe_steps

        moe = validate_moe_steps(probe, hw)
        if moe is not None:
            steps["moe_mla"] = moe
    from cascade_plan.calibration.tree_validation import validate_trees

    trees = validate_trees(probe, hw) if hw is not None else None
    written = []
    if plots:
        from cascade_plan.render.validation_plots import plot_error_heatmap, plot_scatter

        written = (plot_scatter(res, plots / "predicted-vs-measured")
                   + plot_error_heatmap(res, plots / "error-by-region"))
    if json_out:
        print_json(envelope({"calibration": str(calibration),
                             "device": probe.device_name, **{k: v for k, v in res.items() if k != "points"},
                             "points": res["points"], "steps": steps, "trees": trees, "crosscheck": cross}))
        return
    from cascade_plan.calibration.validation import render

    console = make_console()
    render(res, probe.device_name, console)
    if steps is not None:
        from cascade_plan.render.step_validation_render import render_steps

        render_steps(steps, console)
        from cascade_plan.render.moe_step_validation_render import render_moe_steps

        render_moe_steps(steps.get("moe_mla"), console)
    if trees is not None:
        from cascade_plan.render.tree_validation_render import render_trees

        render_trees(trees, console)
    if cross is not None:
        from cascade_plan.render.crosscheck_table import render_crosscheck

        render_crosscheck(cross, console)
    for p in written:
        typer.echo(f"wrote {p}")


def _crosscheck_for(cal: ProbeData) -> dict | None:
    """The AIConfigurator-vs-probe cross-check for this file's GPU, when both kinds ship for it."""
    from cascade_plan.calibration.aic.crosscheck import crosscheck
    from cascade_plan.calibration.calibration_file import find_committed
    from cascade_plan.inputs.hardware import load_hardware

    if not cal.hardware_id:
        return None
    hw = load_hardware(cal.hardware_id)
    other = find_committed(hw, source="probe" if cal.source_kind == "aic" else "aic")
    if other is None:
        return None
    aic, probe = (cal, other) if cal.source_kind == "aic" else (other, cal)
    return crosscheck(aic, probe) if aic.crosscheck else None


def _shipped_or_given(path: Path) -> Path:
    """The file given, or a shipped calibration of that name when no such file exists here."""
    shipped = data_dir("calibrations") / path.name
    return shipped if not path.exists() and path.parent == Path(".") and shipped.is_file() else path
