"""How far a verdict's run speedup can be trusted: the measured speedup error of the numbers behind it.

The error comes from whole decode steps timed on a GPU (a probe calibration's ``steps`` rows, the ones
`validate` reports; never used in fitting). `calibrate` stores the errors of the fits it writes in the
file (`fitted.speedup_errors`: predicting 54 steps per backend takes about a second, which `estimate`
cannot spend at start-up); a file without them has them computed here. A test keeps the shipped file's
stored errors equal to the recomputed ones:

- a probe calibration: the per-step cascade speedup |error| of its own backend's fit, in the workload's
  regime (a model whose GEMM shapes were probed, or a held-out shape), the largest one measured;
- a calibration imported from AIConfigurator: the same, from the probe file its cascade kernels were
  transferred from (named in the file), for that backend;
- the default efficiencies: the defaults' speedup |error| over every measured step of every backend
  (the defaults do not know which kernels will run), the largest one.

A go needs the run speedup to clear 1x by more than that error (cost/verdict.py: with_margin)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path

import msgspec

from cascade_plan.calibration_schema.steps import STEP_KINDS, StepOpRow
from cascade_plan.cost.cost_params import CostParams


class Margin(msgspec.Struct, frozen=True):
    error: float          # relative |error| of a predicted speedup (0.054 = ±5.4%)
    source: str           # where it was measured, in words
    n_steps: int          # measured whole steps behind it
    over: float = 0.0     # the largest over-prediction (predicted / measured - 1 > 0), 0 if none
    under: float = 0.0    # the largest under-prediction (< 0), 0 if none

    def speedup_range(self, predicted: float) -> tuple[float, float]:
        """The run speedups these errors allow: predicted / (1 + error) over the measured errors, the
        prediction itself included."""
        return predicted / (1 + self.over), predicted / (1 + self.under)


def shipped_probe() -> Path | None:
    from cascade_plan.resources import data_dir

    found = sorted(data_dir("calibrations").glob("*-probe-*.json"))
    return found[-1] if found else None


def measured_speedup_errors(probe, hw) -> dict:
    """What `calibrate` stores as `fitted.speedup_errors`: per backend and regime, the signed per-step speedup
    errors of the file's own fits ("fits") and of the default efficiencies ("defaults"), and the models whose
    GEMMs were probed (the "probed" regime)."""
    from cascade_plan.calibration.step_validation import speedup_errors
    from cascade_plan.cost.cost_params import DEFAULT

    out = {"fits": speedup_errors(probe, hw), "defaults": speedup_errors(probe, hw, DEFAULT),
           "probed_models": sorted(_gemm_models(probe.step_ops))}
    moe = moe_speedup_errors(probe, hw)
    return {**out, "moe_fits": moe} if moe else out


def moe_speedup_errors(probe, hw) -> dict[str, dict[str, list[float]]]:
    """Per step kind ("moe", "mla_moe") and backend, the signed per-step speedup errors of the file's fits on its
    whole MoE / MLA + MoE steps (calibration/moe_step_validation.py); empty where it has none."""
    from cascade_plan.calibration.moe_step_validation import moe_step_points

    out: dict[str, dict[str, list[float]]] = {}
    for kind, p in moe_step_points(probe, hw):
        out.setdefault(kind, {}).setdefault(p.backend, []).append(p.speedup_err)
    return out


def _gemm_models(step_ops: Sequence[StepOpRow]) -> set[str]:
    return {r.config.model for r in step_ops if r.op == "gemm" and r.config.model is not None}


@functools.lru_cache(maxsize=16)
def _stored(path: str) -> tuple[str, dict | None]:
    """(hardware id, the stored `fitted.speedup_errors`) of a calibration file, decoding only those two
    fields (the file itself is checked where it is used as a calibration)."""
    import msgspec

    from cascade_plan.calibration.calibration_file import read_already
    from cascade_plan.calibration_schema.speedup_errors import ErrorsOnlyDoc

    try:
        read = read_already(Path(path))     # already decoded for its numbers (estimate on the H200): not again
        doc = (msgspec.json.decode(Path(path).read_bytes(), type=ErrorsOnlyDoc) if read is None
               else msgspec.convert(read, ErrorsOnlyDoc))
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return "", None
    errs = doc.fitted.speedup_errors if doc.fitted else None
    return doc.hardware_id or "", (msgspec.to_builtins(errs) if errs else None)


@functools.lru_cache(maxsize=16)
def _errors(path: str, defaults: bool) -> tuple[str, dict]:
    from cascade_plan.calibration.calibration_file import load_probe
    from cascade_plan.errors import InputError
    from cascade_plan.inputs.hardware import load_hardware

    hw_id, stored = _stored(path)
    if stored:
        return hw_id, stored["defaults" if defaults else "fits"]
    try:                             # a file calibrated before the errors were stored: compute them
        probe = load_probe(Path(path))
        hw_id = probe.require_hardware_id()
        errs = measured_speedup_errors(probe, load_hardware(hw_id))
        return hw_id, errs["defaults" if defaults else "fits"]
    except (InputError, OSError, KeyError, ValueError):
        return "", {}


def _probe_with_steps(params: CostParams) -> Path | None:
    """The calibration file whose measured steps validate these numbers."""
    if params.mode == "default":
        return shipped_probe()
    if not params.source:
        return None
    if params.origin == "aic":
        import msgspec

        from cascade_plan.calibration.calibration_file import read_already
        from cascade_plan.calibration_schema.imported import Source, SourceOnlyDoc

        try:      # the document this run read already, else only `source` decoded (every other field skipped)
            doc = read_already(Path(params.source))
            src = (msgspec.convert(doc.get("source"), Source | None) if doc is not None else
                   msgspec.json.decode(Path(params.source).read_bytes(), type=SourceOnlyDoc).source)
        except (OSError, msgspec.DecodeError, msgspec.ValidationError):
            return None
        name = src.transferred.from_ if src is not None and src.transferred is not None else None
        if not name:
            return None
        p = Path(params.source).with_name(name)
        return p if p.exists() else None
    return Path(params.source)


def step_kind(model) -> str | None:
    """The whole-step kind whose measured errors back a model's margin: "mla_moe", "moe", or None (dense)."""
    if not (model.num_moe_layers and model.num_experts):
        return None
    return "mla_moe" if model.attention == "mla" else "moe"


def _moe_margin(path: Path, params: CostParams, kind: str) -> Margin | None:
    """The margin from the file's own whole MoE / MLA + MoE steps of this kind (the fits' errors stored by
    `calibrate`); None where it timed none."""
    hw_id, stored = _stored(str(path))
    per = ((stored or {}).get("moe_fits") or {}).get(kind)
    if not per:
        return None
    gpu = hw_id.upper() or "the probed GPU"
    words = STEP_KINDS.get(kind, kind)
    if per.get(params.backend or ""):
        vals = per[params.backend or ""]
        where = f"{params.backend} kernels against {len(vals)} whole {words} steps measured on the {gpu}"
    else:
        vals = [e for b in per.values() for e in b]
        where = (f"every backend's kernels against {len(vals)} whole {words} steps measured on the {gpu} (none "
                 f"were timed with {params.backend})")
    return _largest(vals, where + ", one GPU's shard of each model, without its all-reduce")


def speedup_margin(params: CostParams, model_id: str, kind: str | None = None) -> Margin | None:
    """The measured speedup error behind numbers from `params` for a workload of `model_id`; None for
    the ideal bound, or where no measured whole steps back the numbers. `kind` ("moe", "mla_moe": step_kind)
    takes the margin from the file's whole steps of that kind where a probe file timed them; an imported
    file (whose step parts carry no fitted MoE layer term) and the defaults keep the dense steps' margin."""
    if params.mode == "ideal":
        return None
    path = _probe_with_steps(params)
    if path is None:
        return None
    if kind is not None and params.mode != "default" and params.origin != "aic":
        m = _moe_margin(path, params, kind)
        if m is not None:
            return m
    defaults = params.mode == "default"
    hw_id, errs = _errors(str(path), defaults)
    gpu = hw_id.upper() or "the probed GPU"
    if defaults:
        vals = [e for per in errs.values() for regime in per.values() for e in regime]
        where = (f"the default efficiencies against {{n}} whole steps measured on the {gpu} "
                 f"({', '.join(sorted(errs))} kernels)")
    else:
        regime = "held_out" if model_id not in _probed_models(str(path)) else "probed"
        shape = "models whose GEMMs were probed" if regime == "probed" else "held-out model shapes"
        backend = params.margin_backend or params.backend
        per = errs.get(backend or "")
        if per:
            vals = per[regime] or per["probed"] + per["held_out"]
            where = f"{backend} kernels against {{n}} whole steps measured on the {gpu}, {shape}"
        else:   # no whole steps were timed with this backend: the largest error of those that were
            vals = [e for b in errs.values() for e in b[regime]]
            where = (f"every backend's kernels against {{n}} whole steps measured on the {gpu}, {shape} (none were "
                     f"timed with {backend})")
    if not vals:
        return None
    if params.attention_kind == "mla":   # the steps above are GQA models: say what MLA's attention rests on
        where += "; MLA attention from the MLA kernel rows per layer, " + (
            "no whole MLA step timed" if kind is None else
            f"and no MoE layer term (routing, alignment, combine: fitted on and validated against the {gpu}'s "
            "whole MoE steps) in these numbers")
    return _largest(vals, where.format(n=len(vals)))


def _largest(vals, where: str) -> Margin:
    """The margin of signed per-step speedup errors: their largest magnitude, and how far over and under."""
    return Margin(error=float(max(abs(v) for v in vals)), source=f"the largest of {where}", n_steps=len(vals),
                  over=max(float(max(vals)), 0.0), under=min(float(min(vals)), 0.0))


@functools.lru_cache(maxsize=16)
def _probed_models(path: str) -> frozenset[str]:
    _, stored = _stored(path)
    if stored and stored.get("probed_models") is not None:
        return frozenset(stored["probed_models"])
    import msgspec

    from cascade_plan.calibration_schema.document import StepOpsOnlyDoc

    try:
        doc = msgspec.json.decode(Path(path).read_bytes(), type=StepOpsOnlyDoc)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return frozenset()
    return frozenset(_gemm_models(doc.step_ops))
