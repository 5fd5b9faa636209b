"""The `fitted` section `calibrate` writes (ceilings, fits per KV dtype and backend, step parts, speedup errors) and
the check of what its fields cannot say alone."""

from __future__ import annotations

from typing import Annotated

import msgspec

from cascade_plan.calibration_schema.device import FittedCeilings
from cascade_plan.calibration_schema.kernel_fit import BackendFit
from cascade_plan.calibration_schema.quantities import MIN_RATE, Text
from cascade_plan.calibration_schema.speedup_errors import SpeedupErrorsDoc
from cascade_plan.calibration_schema.step_parts import StepPartsDoc, step_parts_problem


class Fitted(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    ceilings: FittedCeilings
    kv_dtypes: dict[Text, dict[Text, BackendFit]]
    step_parts: StepPartsDoc | None = None
    speedup_errors: SpeedupErrorsDoc | None = None
    fit_version: Annotated[int, msgspec.Meta(ge=1)] = 1
    tool_version: Text = ""
    created_utc: Text = ""
    holdout_rule: Text | None = None


def inconsistent(fitted: Fitted | None) -> tuple[tuple, str] | None:
    """The first fit a field-by-field schema cannot refuse: a surface whose grid does not match its
    axes, or an L2 rate that is set but tiny (it divides the step into infinity)."""
    if fitted is None:
        return None
    if fitted.step_parts is not None:
        bad = step_parts_problem(fitted.step_parts)
        if bad:
            return ("fitted", "step_parts") + bad[0], bad[1]
    for kv, per in fitted.kv_dtypes.items():
        for backend, fit in per.items():
            for kind in ("decode_dup", "decode_shared", "prefix", "suffix", "merge", "decode_mla", "prefix_mla",
                         "suffix_mla"):
                k = getattr(fit, kind)
                if k is None:
                    continue
                where = ("fitted", "kv_dtypes", kv, backend, kind)
                s = k.surface
                if s is not None and (len(s.values) != len(s.log_bytes) or any(len(r) != len(s.log_rows)
                                                                                for r in s.values)
                                      or len(s.log_bytes) < 2 or len(s.log_rows) < 2):
                    return where + ("surface",), "the surface's values do not match its axes (rows x columns)"
                if 0 < k.l2_bytes_per_s < MIN_RATE:
                    return where + ("l2_bytes_per_s",), f"must be 0 (none) or at least {MIN_RATE:g} bytes/s"
    return None
