"""What the user chose on the command line for a whole command, as one object per option group: which
cost parameters to use (ideal, a calibration file, a backend, the defaults) and what-if GPU peaks. Plain
data with no imports, so that the CLI can name them at start-up for free."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ParamsChoice:
    """Which cost parameters: ideal peaks, a calibration (given, or shipped for the GPU; `backend` picks its
    kernels; `force` applies one measured on another GPU), or the uncalibrated defaults."""

    ideal: bool = False
    uncalibrated: bool = False
    backend: str | None = None
    calibration: Path | None = None
    force: bool = False


@dataclass(frozen=True)
class WhatIf:
    """The user's replacement GPU peaks, as typed (units parsed by inputs/hardware_whatif.py)."""

    hbm_bandwidth: str | None = None
    memory: str | None = None
    bf16_tflops: str | None = None
    l2: str | None = None

    def apply(self, scn):
        """The scenario on its GPU with these numbers (the same object when none is given)."""
        from cascade_plan.inputs.hardware_whatif import what_if

        hw = what_if(scn.hardware, self.hbm_bandwidth, self.memory, self.bf16_tflops, self.l2)
        return scn if hw is scn.hardware else dataclasses.replace(scn, hardware=hw)
