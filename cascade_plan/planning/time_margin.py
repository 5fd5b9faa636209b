"""How far the default efficiencies' step *times* were from whole decode steps measured on a GPU.

A speedup error (speedup_margin.py) bounds a ratio; a latency or rollout budget needs the times
themselves. The defaults priced every whole step the shipped probe file timed (per-sequence and cascade,
every backend); the signed errors (predicted / measured - 1) bound what a measured step could be for a
default-priced one: between predicted / (1 + largest) and predicted / (1 + smallest). Computing them
prices ~80 steps (~0.2 s), so only a command that prices something uncalibrated against a time budget
asks, once per process."""

from __future__ import annotations

import functools

import msgspec


class TimeErrors(msgspec.Struct, frozen=True):
    under: float         # the most negative signed error (the defaults too fast), <= 0
    over: float          # the most positive (too slow), >= 0
    n_steps: int
    source: str          # where the steps were measured, in words

    def time_range(self, predicted_s: float) -> tuple[float, float]:
        """The measured times these errors allow for a predicted one (fastest, slowest)."""
        return predicted_s / (1 + self.over), predicted_s / (1 + self.under)


@functools.lru_cache(maxsize=1)
def default_time_errors() -> dict[bool, TimeErrors] | None:
    """Per mode (cascade True / False), the defaults' step-time errors on the shipped probe's whole steps;
    None where no probe file with whole steps ships."""
    from cascade_plan.calibration.calibration_file import load_probe
    from cascade_plan.calibration.step_validation import step_points
    from cascade_plan.cost.cost_params import DEFAULT
    from cascade_plan.inputs.hardware import load_hardware
    from cascade_plan.planning.speedup_margin import shipped_probe

    path = shipped_probe()
    if path is None:
        return None
    probe = load_probe(path)
    hw_id = probe.require_hardware_id()
    points = step_points(probe, load_hardware(hw_id), DEFAULT)
    if not points:
        return None
    where = f"the default efficiencies against {len(points)} whole steps measured on the {hw_id.upper()}"
    out = {}
    for cascade, errs in ((True, [p.cas_err for p in points]), (False, [p.ps_err for p in points])):
        out[cascade] = TimeErrors(under=min(0.0, min(errs)), over=max(0.0, max(errs)), n_steps=len(errs),
                                  source=where)
    return out
