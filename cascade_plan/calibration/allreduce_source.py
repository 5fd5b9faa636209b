"""Measured all-reduce over extrapolated: the probe measures NCCL only on the GPU counts the
machine it ran on had (2 on the H200 run), and models 4 and 8 GPUs from that fit. Where AIConfigurator's
tables for the same GPU measured a count the probe only modelled, the measured figure is used instead,
labelled with its origin and its algorithm: AIConfigurator's vLLM table times vLLM's custom all-reduce,
not NCCL (docs/aic.md), which is what vLLM runs for decode-sized messages. Counts the probe measured keep
the probe's figure. Every count is priced from a curve over message size, never a line: the probe's
measured rows, the AIConfigurator table, or (extrapolated counts) the measured curve carried over."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from cascade_plan.calibration_schema.steps import StepOpRow
from cascade_plan.cost.step_parts import AllReduceFit, StepParts
from cascade_plan.inputs.hardware import HardwareProfile


def measured_allreduce(hw: HardwareProfile) -> tuple[str, dict[int, AllReduceFit]] | None:
    """(file name, fits by GPU count) of the shipped AIConfigurator calibration for this GPU, measured
    counts only; None where there is none."""
    from pathlib import Path

    from cascade_plan.calibration.calibration_file import find_committed
    from cascade_plan.calibration.step_parts_doc import allreduce_from_doc

    aic = find_committed(hw, "aic")
    doc = aic.fits.step_parts if aic is not None and aic.fits is not None else None
    if aic is None or doc is None or not doc.allreduce:
        return None
    fits = allreduce_from_doc(doc)
    return Path(aic.path).name, {n: a for n, a in fits.items() if a.origin == "aic"}


def with_measured_curves(step: StepParts, rows: Sequence[StepOpRow] = ()) -> StepParts:
    """`step` with each all-reduce that has no curve of its own given the probe file's measured one: the
    rows of `step_ops` for a measured count, that curve carried over for an extrapolated count (files
    fitted before the curve was kept store only the line). Nothing changes where a fit has a table."""
    if not rows or all(a.table_bytes for a in step.allreduce.values()):
        return step
    from cascade_plan.calibration.step_fit import allreduce_curve
    from cascade_plan.cost.step_parts import carried_curve

    ar = dict(step.allreduce)
    for n, a in step.allreduce.items():
        if a.origin == "measured" and not a.table_bytes:
            tb, ts = allreduce_curve(rows, n)
            if len(tb) >= 2:
                ar[n] = msgspec.structs.replace(a, table_bytes=tb, table_s=ts,
                                                basis=a.basis + "; the measured curve (step_ops rows), interpolated")
    measured = [n for n, a in ar.items() if a.origin == "measured" and a.table_bytes]
    if measured:
        base = ar[max(measured)]
        for n, a in step.allreduce.items():
            if a.origin == "extrapolated" and not a.table_bytes:
                tb, ts = carried_curve(base, n)
                ar[n] = msgspec.structs.replace(a, table_bytes=tb, table_s=ts,
                                                basis=a.basis + f"; the measured {base.gpus}-GPU curve carried over")
    return msgspec.structs.replace(step, allreduce=ar)


def prefer_measured_allreduce(step: StepParts, hw: HardwareProfile, rows: Sequence[StepOpRow] = ()) -> StepParts:
    """`step` with every extrapolated all-reduce GPU count replaced by the same GPU's AIConfigurator
    measurement where one exists; a note says which counts and from where. `rows`: the probe's step_ops,
    whose measured all-reduce rows give every count its curve (with_measured_curves)."""
    step = with_measured_curves(step, rows)
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
        ar[n] = msgspec.structs.replace(aic[n], basis=f"{name}: {aic[n].basis}; used instead of the probe's "
                                                  "extrapolation (measured data preferred)")
    kept = ", ".join(ar[n].label for n in sorted(ar) if n not in swap)
    note = (f"all-reduce for {', '.join(map(str, swap))} GPUs: AIConfigurator's measurement ({name}, "
            f"{ar[swap[0]].algorithm}) instead of the probe's extrapolation" + (f"; kept: {kept}" if kept else ""))
    return msgspec.structs.replace(step, allreduce=ar, notes=step.notes + (note,))
