"""What the user chose on the command line for a whole command, as one object per option group: which
cost parameters to use (ideal, a calibration file, a backend, the defaults) and what-if GPU peaks. Plain
data (msgspec structs: cheap to define) importing nothing of ours, so that the CLI can name them at start-up
for free."""

from __future__ import annotations

from pathlib import Path

import msgspec


class ParamsChoice(msgspec.Struct, frozen=True):
    """Which cost parameters: ideal peaks, a calibration (given, or shipped for the GPU; `backend` picks its
    kernels; `force` applies one measured on another GPU), or the uncalibrated defaults."""

    ideal: bool = False
    uncalibrated: bool = False
    backend: str | None = None
    calibration: Path | None = None
    force: bool = False


class WhatIf(msgspec.Struct, frozen=True):
    """The user's replacement GPU peaks, as typed (units parsed by inputs/hardware_whatif.py)."""

    hbm_bandwidth: str | None = None
    memory: str | None = None
    bf16_tflops: str | None = None
    l2: str | None = None

    def apply(self, scn):
        """The scenario on its GPU with these numbers (the same object when none is given)."""
        from cascade_plan.inputs.hardware_whatif import what_if

        hw = what_if(scn.hardware, self.hbm_bandwidth, self.memory, self.bf16_tflops, self.l2)
        return scn if hw is scn.hardware else msgspec.structs.replace(scn, hardware=hw)
