"""Verdicts that carry their evidence: their basis, the error behind it, and whether the workload was measured.

`assess` is `estimate` plus what backs or undermines its go/no-go, computed rather than quoted:

- numbers from the default efficiencies: on every GPU that has measured numbers (a probe calibration
  or any other measured source `select_params` picks), the same workload under the defaults against
  the measured numbers, so the reader sees how far the defaults were off for *this* workload;
- measured numbers applied to a shape the measurements do not cover (CostParams.notes: MLA on GQA
  kernels, a query-group width beyond the measured ones, another head dim or KV dtype): the run
  speedup over every source we have (each measured backend, the defaults, the bytes-only bound),
  and no verdict when that range straddles 1x;
- a workload that reaches beyond the calibration's measured grid (Estimate.coverage: contexts, batch or
  one layer's shared prefix larger than any measured; cost/coverage.py): the same range.

Only CostParams.mode / label / notes / source are read, so any measured source works the same way."""

from __future__ import annotations

import msgspec

from cascade_plan.cost.capacity import DEFAULT_RESERVE_FRACTION
from cascade_plan.cost.cost_params import DEFAULT, IDEAL, CostParams
from cascade_plan.cost.estimate import Estimate, estimate, run_speedup
from cascade_plan.cost.verdict import extrapolated, with_evidence, with_margin
from cascade_plan.inputs.workload import Scenario

UNMEASURED = ("default", "ideal")
MAX_EVIDENCE_GPUS = 2      # the workload's own GPU and the most directly measured others; a line, not a table


def assess(scn: Scenario, params: CostParams, reserve_fraction: float = DEFAULT_RESERVE_FRACTION) -> Estimate:
    """The estimate with its verdict qualified by the evidence behind it."""
    return attach_evidence(estimate(scn, params, reserve_fraction))


def attach_evidence(est: Estimate) -> Estimate:
    # The defaults' evidence first: it reads the probe file whole, and the margin then takes its one field
    # from that read instead of parsing the file again (it needs only the estimate, which the margin keeps).
    text = defaults_error(est) if est.verdict.judged and est.params.mode == "default" else None
    # before the margin: an imported GPU's transferred probe file is read here the shared way (read_shipped), and
    # the margin then takes its stored errors from that read instead of parsing the 4 MB file again
    est = attach_numerics(est)
    est = attach_margin(est)
    v, p = est.verdict, est.params
    if not v.judged or p.mode == "ideal":
        return est
    if p.mode == "default":
        return msgspec.structs.replace(est, verdict=with_evidence(v, text)) if text else est
    notes = p.notes + est.coverage       # the shape, and the workload's reach, outside the measurements
    if notes:
        lo, hi, sources = speedup_range(est)
        return msgspec.structs.replace(est, verdict=extrapolated(v, "; ".join(notes), lo, hi, sources))
    return est


def attach_numerics(est: Estimate) -> Estimate:
    """The estimate with the measured error against float32 of the kernels behind its numbers (every verdict,
    judged or not: it describes the kernels, not the workload); unchanged where none stand behind them."""
    from cascade_plan.planning.kernel_numerics import kernel_numerics

    n = kernel_numerics(est.params, est.scenario.kv_dtype)
    return est if n is None else msgspec.structs.replace(est, numerics=n.to_json())


def attach_margin(est: Estimate) -> Estimate:
    """The verdict held against the measured speedup error of its numbers (planning/speedup_margin.py):
    a go within that error becomes marginal; every judged verdict carries the error it was held to."""
    from cascade_plan.planning.speedup_margin import speedup_margin, step_kind

    if not est.verdict.judged:
        return est
    m = speedup_margin(est.params, est.scenario.model.id, step_kind(est.scenario.model))
    if m is None:
        return est
    v = with_margin(est.verdict, est.run_speedup, m.error, m.source)
    if est.params.mode == "default" and v.speedup_range is None:
        # uncalibrated numbers are never one crisp figure: the range their measured error allows
        v = msgspec.structs.replace(v, speedup_range=m.speedup_range(est.run_speedup))
    return msgspec.structs.replace(est, verdict=v)


def _measured_gpus(first: str) -> list[str]:
    """Built-in GPUs with a measured source shipped for them (known from the files' names, nothing is
    opened): the workload's own first, then those measured by our probe before imported tables."""
    from cascade_plan.inputs.hardware import builtin_hardware_ids
    from cascade_plan.planning.params_select import shipped_source

    source = {h: shipped_source(h) for h in builtin_hardware_ids()}
    return sorted((h for h, s in source.items() if s != "default"), key=lambda h: (h != first, source[h] != "probe"))


def _gpu_pairs(est: Estimate) -> list[tuple[str, float, float, CostParams, list[str]]]:
    """(GPU, run speedup under the defaults, under the measured numbers, those numbers, where the workload reaches
    beyond their grid) on the GPUs with measured numbers: the workload's own first, then those whose cascade
    kernels were measured on the GPU itself (our probe) before imported tables. Only the runs are priced: the
    evidence compares their speedups, not the steps, memory or verdict `estimate` adds."""
    from cascade_plan.inputs.hardware import load_hardware
    from cascade_plan.planning.params_select import select_params

    scn = est.scenario
    found = []
    # already in the order shown: open only as many calibrations as are shown
    for hw_id in _measured_gpus(scn.hardware.id):
        other = scn if hw_id == scn.hardware.id else msgspec.structs.replace(scn, hardware=load_hardware(hw_id))
        measured = select_params(other)
        if measured.mode not in UNMEASURED:
            found.append((other, measured))
        if len(found) == MAX_EVIDENCE_GPUS:
            break
    out = []
    for other, measured in found:
        defaults = est.run_speedup if other is scn else run_speedup(other, est.params)[0]
        speedup, coverage = run_speedup(other, measured)
        out.append((other.hardware.id, defaults, speedup, measured, coverage))
    return out


def defaults_error(est: Estimate) -> str | None:
    """How far the default efficiencies were from measured numbers for this workload, per GPU that has
    both; None where no GPU has measured numbers."""
    pairs = _gpu_pairs(est)
    if not pairs:
        return None
    parts = []
    for hw_id, d, m, params, coverage in pairs:
        ratio = d / m
        off = (f"{ratio:.1f}x too optimistic" if ratio >= 1.05 else
               f"{1 / ratio:.1f}x too pessimistic" if ratio <= 1 / 1.05 else "within 5%")
        flip = (d >= 1.0) != (m >= 1.0)
        where = f"this GPU ({hw_id})" if hw_id == est.scenario.hardware.id else f"the {hw_id}"
        caveat = " (themselves extrapolated to this shape)" if params.notes or coverage else ""
        parts.append(f"on {where} the defaults put this workload at {d:.2f}x against "
                     f"{m:.2f}x with measured kernels ({params.numbers}){caveat}: {off}"
                     + (", and on the other side of 1x" if flip else ""))
    return ("Evidence: " + "; ".join(parts) + ". The defaults are guesses until this GPU is measured "
            "(`cascade-plan probe`).")


def _alternatives(est: Estimate) -> tuple[list[CostParams], list[str]]:
    """Every other source of numbers for this workload: the other measured backends of the same
    calibration (where it is a probe file), the defaults, and the bytes-only bound."""
    p, scn = est.params, est.scenario
    alts, names = [], []
    if p.source:
        import msgspec

        from cascade_plan.errors import InputError
        from cascade_plan.planning.params_select import calibrated_for

        try:
            probe = _calibration_of(p.source)
            kvs = probe.fits.kv_dtypes if probe.fits is not None else {}
            backends = [b for b in (kvs.get(scn.kv_dtype) or kvs.get("bf16") or {}) if b != p.backend]
            alts += [calibrated_for(probe, b, scn.kv_dtype, scn.hardware, scn.model) for b in backends]
            names += backends
        except (InputError, OSError, KeyError, msgspec.DecodeError):
            pass
    return alts + [DEFAULT, IDEAL], names


def _calibration_of(source: str):
    """The calibration file behind measured numbers, read the way select_params read it: a shipped file as
    find_committed reads it (read_shipped: decoded only, once per process), a user's file through load_probe's
    checks again. Checking a shipped file row by row here cost 0.2-0.9 s of `estimate` start-up on every
    extrapolated verdict (beam-search or deepseek-v3 on the H200 or B200)."""
    from pathlib import Path

    from cascade_plan.calibration.calibration_file import ProbeData, load_probe, read_shipped
    from cascade_plan.resources import data_dir

    path = Path(source)
    if path.parent.resolve() == data_dir("calibrations").resolve():
        return ProbeData(str(path), read_shipped(path))
    return load_probe(path)


def speedup_range(est: Estimate) -> tuple[float, float, str]:
    """(lowest, highest) whole-run speedup over every source, and the sources in words."""
    alts, backends = _alternatives(est)
    runs = [est.run_speedup] + [run_speedup(est.scenario, a)[0] for a in alts]
    measured = ", ".join([est.params.backend or est.params.mode] + backends)
    sources = f"the measured kernels ({measured}), the default efficiencies and the bytes-only bound"
    return min(runs), max(runs), sources
