"""Which cost parameters a command uses: ideal, a calibration (given, or shipped for this GPU), or
the uncalibrated defaults. The choice is always visible in the output (CostParams.label)."""

from __future__ import annotations

from pathlib import Path

from cascade_plan.cost.cost_params import DEFAULT, IDEAL, CostParams
from cascade_plan.errors import InputError


def _shipped_for(hardware_id: str) -> bool:
    from cascade_plan.resources import data_dir

    return any(data_dir("calibrations").glob(f"{hardware_id}-*.json"))


def select_params(ideal: bool, scn=None, calibration: Path | None = None, backend: str | None = None,
                  force: bool = False, uncalibrated: bool = False) -> CostParams:
    if ideal:
        if calibration or backend:
            raise InputError("--ideal uses peak numbers: leave out --calibration and --backend")
        return IDEAL
    if uncalibrated or scn is None:
        if calibration or backend:
            raise InputError("--uncalibrated uses the default efficiencies: leave out --calibration and --backend")
        return DEFAULT
    if calibration is None and backend is None and not _shipped_for(scn.hardware.id):
        return DEFAULT        # nothing shipped for this GPU: skip loading the calibration machinery
    from cascade_plan.calibration.probe_calibration import BACKENDS, check_device, find_committed, load_probe, params_from_probe

    if backend is not None and backend not in BACKENDS:
        raise InputError(f"--backend: unknown backend {backend!r}: use one of {', '.join(BACKENDS)}")
    probe = load_probe(Path(calibration)) if calibration else find_committed(scn.hardware)
    if probe is None:
        if backend:
            raise InputError(f"--backend needs a calibration: none is shipped for {scn.hardware.id}; measure one with "
                             "`cascade-plan probe` and `cascade-plan calibrate`, then pass --calibration FILE")
        return DEFAULT
    check_device(probe, scn.hardware, force)
    return params_from_probe(probe, backend, scn.kv_dtype, scn.hardware, scn.model)
