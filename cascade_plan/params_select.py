"""Which cost parameters a command uses: ideal, default, or a calibration file."""

from __future__ import annotations

from cascade_plan.cost_params import DEFAULT, IDEAL, CostParams


def select_params(ideal: bool) -> CostParams:
    return IDEAL if ideal else DEFAULT
