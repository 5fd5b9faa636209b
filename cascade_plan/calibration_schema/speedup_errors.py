"""The whole steps' measured speedup errors as a calibration file stores them (`fitted.speedup_errors`, written by
`calibrate`, read by planning/speedup_margin.py for every verdict's margin), and the file read for them alone."""

from __future__ import annotations

from typing import Literal

import msgspec

from cascade_plan.calibration_schema.quantities import SpeedupError, Text


class SpeedupErrorsDoc(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Per backend and regime ("probed", "held_out", and "regimes": steps of small models, long contexts and the
    like, calibration/step_validation.py step_regimes), the signed per-step speedup errors on the file's measured
    whole steps: of its fits, and of the default efficiencies (planning/speedup_margin.py)."""
    fits: dict[Text, dict[Literal["probed", "held_out", "regimes"], list[SpeedupError]]]
    defaults: dict[Text, dict[Literal["probed", "held_out", "regimes"], list[SpeedupError]]]
    probed_models: list[Text] | None = None         # models whose GEMMs were probed: the "probed" regime
    moe_fits: dict[Text, dict[Text, list[SpeedupError]]] | None = None   # by MoE step kind, backend


class _FittedErrorsOnly(msgspec.Struct, frozen=True, kw_only=True):
    speedup_errors: SpeedupErrorsDoc | None = None


class ErrorsOnlyDoc(msgspec.Struct, frozen=True, kw_only=True):
    """A calibration file read for its stored speedup errors alone (every other field skipped unparsed)."""
    hardware_id: str | None = None
    fitted: _FittedErrorsOnly | None = None
