"""Which cost parameters a command uses: ideal, a calibration (given, or shipped for this GPU), or
the uncalibrated defaults. The choice is always visible in the output (CostParams.label)."""

from __future__ import annotations

from pathlib import Path

import msgspec

from cascade_plan.cost.cost_params import DEFAULT, IDEAL, CostParams
from cascade_plan.errors import InputError
from cascade_plan.inputs.choices import ParamsChoice


def shipped_source(hardware_id: str) -> str:
    """What a GPU's numbers come from by default, by the shipped files' names (nothing is opened):
    "probe", "aic" (AIConfigurator) or "default"."""
    from cascade_plan.resources import data_files

    for kind in ("probe", "aic"):
        if data_files("calibrations", f"{hardware_id}-{kind}-", ".json"):
            return kind
    return "default"


def select_params(scn=None, choice: ParamsChoice = ParamsChoice()) -> CostParams:
    """The cost parameters for `scn` under the user's choice (no scenario: ideal or the defaults)."""
    ideal, calibration, backend = choice.ideal, choice.calibration, choice.backend
    if ideal:
        if calibration or backend:
            raise InputError("--ideal uses peak numbers: leave out --calibration and --backend")
        return IDEAL
    if choice.uncalibrated or scn is None:
        if calibration or backend:
            raise InputError("--uncalibrated uses the default efficiencies: leave out --calibration and --backend")
        return DEFAULT
    base = what_if_base(scn.hardware)
    if base is not None:          # the base GPU's numbers, scaled to the user's peaks
        measured = select_params(msgspec.structs.replace(scn, hardware=base), choice)
        return what_if_params(measured, base, scn.hardware)
    if calibration is None and backend is None and shipped_source(scn.hardware.id) == "default":
        return DEFAULT        # nothing shipped for this GPU: skip loading the calibration machinery
    from cascade_plan.calibration.backends import BACKENDS
    from cascade_plan.calibration.calibration_file import find_committed, load_probe
    from cascade_plan.calibration.probe_params import check_device, params_from_probe

    if backend is not None and backend not in BACKENDS:
        raise InputError(f"--backend: unknown backend {backend!r}: use one of {', '.join(BACKENDS)}")
    probe = load_probe(Path(calibration)) if calibration else find_committed(scn.hardware)
    if probe is None:
        if backend:
            raise InputError(f"--backend needs a calibration: none is shipped for {scn.hardware.id}; measure one with "
                             "`cascade-plan probe` and `cascade-plan calibrate`, then pass --calibration FILE")
        return DEFAULT
    check_device(probe, scn.hardware, choice.force)
    return params_from_probe(probe, backend, scn.kv_dtype, scn.hardware, scn.model)


def what_if_base(hw):
    """The shipped or written profile a what-if GPU was made from; None for any other GPU, or where
    that profile cannot be found again by its id (then no calibration applies to the what-if)."""
    from cascade_plan.inputs.hardware import load_hardware
    from cascade_plan.inputs.hardware_whatif import what_if_base_id

    base_id = what_if_base_id(hw)
    if base_id is None:
        return None
    try:
        return load_hardware(base_id)
    except InputError:
        return None


def what_if_params(params: CostParams, base, hw) -> CostParams:
    """`base`'s measured numbers on the what-if GPU `hw`: kernel and GEMM efficiencies are fractions of
    the peaks, so bandwidth-bound parts scale with the bandwidth and compute-bound parts with the FLOP
    rate; the glue's per-token (bandwidth-bound) costs scale by the bandwidth ratio and the L2 reuse
    window by the L2 ratio; fixed costs (launches, per-row setup, latencies) and the all-reduce (the
    interconnect, not HBM) are kept. Ideal and default numbers need nothing: they are fractions of
    the peaks too. A what-if equal to the profile changes no number."""
    if params.mode != "calibrated":
        return params
    bw = base.hbm_bytes_per_s / hw.hbm_bytes_per_s
    step = params.step
    if step is not None and bw != 1.0:
        glue = msgspec.structs.replace(step.glue, per_token_layer_s=step.glue.per_token_layer_s * bw,
                                       per_token_step_s=step.glue.per_token_step_s * bw)
        step = msgspec.structs.replace(step, glue=glue)
    window = params.l2_window_bytes
    if window and base.l2_bytes and hw.l2_bytes != base.l2_bytes:
        window = window * hw.l2_bytes / base.l2_bytes
    scaled = [f"{name} x{new / old:.3g}" for name, new, old in
              (("HBM", hw.hbm_bytes_per_s, base.hbm_bytes_per_s), ("bf16", hw.dense_bf16_flop_per_s,
               base.dense_bf16_flop_per_s), ("L2", hw.l2_bytes, base.l2_bytes)) if old and new != old]
    how = (f" ({', '.join(scaled)}: bandwidth-bound parts scaled by the bandwidth, compute-bound by the FLOP "
           "rate, fixed costs kept)") if scaled else " (the profile's own peaks: no kernel time scaled)"
    if hw.memory_bytes != base.memory_bytes:
        how += f"; memory {hw.memory_bytes / 1e9:,.0f} GB instead of {base.memory_bytes / 1e9:,.0f} GB (capacity only)"
    # Measured attention rows were timed at the base GPU's peaks: under changed peaks the fitted kernels,
    # scaled as above, price attention (the rows still price a what-if equal to the profile).
    measured = params.measured if not scaled else None
    if scaled and params.measured is not None:
        how += "; attention from the fitted kernels (the measured rows hold for the base GPU's peaks only)"
    return msgspec.structs.replace(params, step=step, l2_window_bytes=window, measured=measured,
                                   what_if=f"what-if on measured kernels of {base.id}{how}")


def calibrated_for(probe, backend: str | None, kv_dtype: str, hw, model=None) -> CostParams:
    """`params_from_probe` for any GPU, what-ifs included (fitted against the base GPU, then scaled)."""
    from cascade_plan.calibration.probe_params import params_from_probe

    base = what_if_base(hw)
    if base is None:
        return params_from_probe(probe, backend, kv_dtype, hw, model)
    return what_if_params(params_from_probe(probe, backend, kv_dtype, base, model), base, hw)


def backend_unpriced(scn, choice: ParamsChoice) -> str | None:
    """Why `params_for_gpu` cannot honour the asked kernels on this GPU (no calibration ships for it), or None."""
    from cascade_plan.calibration.calibration_file import find_committed

    if choice.backend is None or choice.ideal or find_committed(scn.hardware) is not None:
        return None
    return f"no calibration of {choice.backend} kernels ships for {scn.hardware.id}"


def params_for_gpu(scn, choice: ParamsChoice) -> CostParams:
    """The one path for a GPU the user gave no calibration file for (compare's rows, the report's and the
    plots' other GPUs, estimate without --calibration): ideal or the defaults when asked, else the GPU's
    own best shipped source: the project's probe, else AIConfigurator's tables, else the defaults."""
    return select_params(scn, msgspec.structs.replace(choice, calibration=None, force=False))


def sources_note(gpu_params: list[tuple[str, CostParams]]) -> str | None:
    """One line when rows rest on different sources (measured on the GPU, imported from AIConfigurator,
    default guesses), naming each GPU's; None when they all share one."""
    tags = dict.fromkeys(p.numbers for _, p in gpu_params)
    if len(tags) <= 1:
        return None
    per = "; ".join(f"{tag}: {', '.join(dict.fromkeys(g for g, p in gpu_params if p.numbers == tag))}" for tag in tags)
    return (f"numbers differ by GPU ({per}). probe = measured on that GPU by our probe; aic = NVIDIA AIConfigurator's "
            "measured tables with the cascade kernels transferred from the H200 probe; default = uncalibrated guesses")
