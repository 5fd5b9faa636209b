"""Which cost parameters a command uses: ideal, a calibration (given, or shipped for this GPU), or
the uncalibrated defaults. The choice is always visible in the output (CostParams.label)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cascade_plan.cost.cost_params import DEFAULT, IDEAL, CostParams
from cascade_plan.errors import InputError


def shipped_source(hardware_id: str) -> str:
    """What a GPU's numbers come from by default, by the shipped files' names (nothing is opened):
    "probe", "aic" (AIConfigurator) or "default"."""
    from cascade_plan.resources import data_dir

    for kind in ("probe", "aic"):
        if any(data_dir("calibrations").glob(f"{hardware_id}-{kind}-*.json")):
            return kind
    return "default"


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
    if calibration is None and backend is None and shipped_source(scn.hardware.id) == "default":
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


@dataclass(frozen=True)
class ParamsChoice:
    """What the user asked for, applied to every GPU a command looks at."""

    ideal: bool = False
    uncalibrated: bool = False
    backend: str | None = None


def params_for_gpu(scn, choice: ParamsChoice) -> CostParams:
    """The one path for a GPU the user gave no calibration file for (compare's rows, the report's and the
    plots' other GPUs, estimate without --calibration): ideal or the defaults when asked, else the GPU's
    own best shipped source: the project's probe, else AIConfigurator's tables, else the defaults."""
    return select_params(choice.ideal, scn, None, choice.backend, False, choice.uncalibrated)


def sources_note(gpu_params: list[tuple[str, CostParams]]) -> str | None:
    """One line when rows rest on different sources (measured on the GPU, imported from AIConfigurator,
    default guesses), naming each GPU's; None when they all share one."""
    tags = dict.fromkeys(p.numbers for _, p in gpu_params)
    if len(tags) <= 1:
        return None
    per = "; ".join(f"{tag}: {', '.join(dict.fromkeys(g for g, p in gpu_params if p.numbers == tag))}" for tag in tags)
    return (f"numbers differ by GPU ({per}). probe = measured on that GPU by our probe; aic = NVIDIA AIConfigurator's "
            "measured tables with the cascade kernels transferred from the H200 probe; default = uncalibrated guesses")
