"""Measured all-reduce over extrapolated (issue 8): the probe measures NCCL only on the GPU counts the
machine it ran on had (2 on the H200 run), and models 4 and 8 GPUs from that fit. Where AIConfigurator's
tables for the same GPU measured a count the probe only modelled, the measured figure is used instead,
labelled with its origin and its algorithm: AIConfigurator's vLLM table times vLLM's custom all-reduce,
not NCCL (docs/aic.md), which is what vLLM runs for decode-sized messages. Counts the probe measured keep
the probe's figure."""

from __future__ import annotations

import dataclasses

from cascade_plan.cost.step_parts import AllReduceFit, StepParts


def measured_allreduce(hw) -> tuple[str, dict[int, AllReduceFit]] | None:
    """(file name, fits by GPU count) of the shipped AIConfigurator calibration for this GPU, measured
    counts only; None where there is none."""
    from pathlib import Path

    from cascade_plan.calibration.probe_calibration import find_committed
    from cascade_plan.cost.step_parts import step_parts_from_json

    aic = find_committed(hw, "aic")
    doc = (aic.fitted.get("step_parts") if aic is not None else None) or {}
    if not doc.get("allreduce"):
        return None
    try:
        fits = step_parts_from_json(doc).allreduce
    except ValueError:
        return None
    return Path(aic.path).name, {n: a for n, a in fits.items() if a.origin == "aic"}


def prefer_measured_allreduce(step: StepParts, hw) -> StepParts:
    """`step` with every extrapolated all-reduce GPU count replaced by the same GPU's AIConfigurator
    measurement where one exists; a note says which counts and from where."""
    modelled = sorted(n for n, a in step.allreduce.items() if a.origin == "extrapolated")
    found = measured_allreduce(hw) if modelled else None
    if not found:
        return step
    name, aic = found
    swap = [n for n in modelled if n in aic]
    if not swap:
        return step
    ar = dict(step.allreduce)
    for n in swap:
        ar[n] = dataclasses.replace(aic[n], basis=f"{name}: {aic[n].basis}; used instead of the probe's "
                                                  "extrapolation (measured data preferred)")
    kept = ", ".join(ar[n].label for n in sorted(ar) if n not in swap)
    note = (f"all-reduce for {', '.join(map(str, swap))} GPUs: AIConfigurator's measurement ({name}, "
            f"{ar[swap[0]].algorithm}) instead of the probe's extrapolation" + (f"; kept: {kept}" if kept else ""))
    return dataclasses.replace(step, allreduce=ar, notes=step.notes + (note,))
