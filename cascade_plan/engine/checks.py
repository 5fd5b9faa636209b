"""`cascade-plan check`'s gates for CI: an estimate, its memory capacity and the engine's choice judged against a
workload's thresholds (render/check_report.py writes the JUnit XML and the markdown summary)."""

from __future__ import annotations

from dataclasses import dataclass

from cascade_plan.cost.capacity import Capacity
from cascade_plan.cost.estimate import Estimate
from cascade_plan.engine.engine_gate import PAYS_THRESHOLD, EngineView
from cascade_plan.inputs.workload import Checks
from cascade_plan.units import fmt_apart, fmt_seconds


def _x(v: float, d: int) -> str:
    return f"{v:.{d}f}x"


def _apart_s(a: float, b: float) -> tuple[str, str]:
    return fmt_apart(a, b, fmt_seconds, 3)


@dataclass(frozen=True)
class CheckResult:
    name: str
    passed: bool
    measured: float | bool | int
    threshold: float | bool | int
    text: str              # "min_run_speedup: 3.40x >= 2.00x"


NEGATED = {">=": "<", "<=": ">", "==": "!="}


def has_checks(checks: Checks) -> bool:
    return any(getattr(checks, f) is not None for f in checks.__struct_fields__)


def merge_checks(base: Checks | None, **overrides) -> Checks:
    values = {f: getattr(base, f) for f in Checks.__struct_fields__} if base else {}
    values.update({k: v for k, v in overrides.items() if v is not None})
    return Checks(**values)


def picked_mode(est: Estimate) -> str:
    return "cascade" if est.run_speedup >= PAYS_THRESHOLD else "per-sequence"


def run_checks(est: Estimate, cap: Capacity, engine: EngineView, checks: Checks,
               margin: bool = False, waves: dict | None = None) -> list[CheckResult]:
    """`margin`: judge min_run_speedup and cascade_chosen on the run speedup less the measured error of
    its numbers (speedup / (1 + error), the verdict's margin), where the verdict carries one. `waves`: per mode
    (cascade True / False), the batch in waves that fit (serving/capacity_search.own_run: tpot_s, rollout_s,
    waves, sequences), which max_tpot_ms and max_rollout_s judge."""
    out: list[CheckResult] = []
    mode = picked_mode(est)
    steps = est.costs.cas_step_s if mode == "cascade" else est.costs.ps_step_s
    run_s = est.run_cascade_s if mode == "cascade" else est.run_per_sequence_s
    fit = cap.max_sequences_shared if est.scenario.prefix_caching else cap.max_sequences_unshared

    def add(name, measured, threshold, ok, shown_m, op, shown_t):
        # A failure states the condition that holds ("3.40x < 5.00x"), then what was required.
        text = (f"{name}: {shown_m} {op} {shown_t}" if ok else
                f"{name}: {shown_m} {NEGATED[op]} {shown_t} (required: {op} {shown_t})")
        out.append(CheckResult(name, bool(ok), measured, threshold, text))

    mem = est.memory
    if mem is not None and not mem.fits:   # every other figure is hypothetical for a batch that cannot run
        out.append(CheckResult("fits_in_memory", False, False, True, f"fits_in_memory: does not fit: {mem.reason}"))
    c = checks
    err = est.verdict.margin_error if margin else None
    speedup = est.run_speedup if err is None else est.run_speedup / (1 + err)
    bound = c.min_run_speedup if c.min_run_speedup is not None else PAYS_THRESHOLD
    judged, bound_shown = fmt_apart(speedup, bound, _x, 2)
    shown = (judged if err is None
             else f"{judged} ({est.run_speedup:.2f}x less its ±{err:.1%} error)")
    if c.min_run_speedup is not None:
        add("min_run_speedup", speedup, c.min_run_speedup, speedup >= c.min_run_speedup, shown, ">=", bound_shown)
    if c.max_step_s is not None:
        worst = float(steps.max())
        w, t = _apart_s(worst, c.max_step_s)
        add("max_step_s", worst, c.max_step_s, worst <= c.max_step_s, f"{w} (slowest {mode} step)", "<=", t)
    if c.max_run_s is not None:
        r, t = _apart_s(run_s, c.max_run_s)
        add("max_run_s", run_s, c.max_run_s, run_s <= c.max_run_s, f"{r} ({mode} decode)", "<=", t)
    run = waves.get(mode == "cascade") if waves and (c.max_tpot_ms is not None or c.max_rollout_s is not None) else None
    in_waves = f", {run.waves} waves of {run.sequences:,} sequences" if run is not None and run.waves > 1 else ""
    if c.max_tpot_ms is not None and run is not None:
        r, t = _apart_s(run.tpot_s, c.max_tpot_ms * 1e-3)
        add("max_tpot_ms", run.tpot_s * 1e3, c.max_tpot_ms, run.tpot_s * 1e3 <= c.max_tpot_ms,
            f"{r} (mean {mode} step{in_waves})", "<=", t)
    if c.max_rollout_s is not None and run is not None:
        r, t = _apart_s(run.rollout_s, c.max_rollout_s)
        add("max_rollout_s", run.rollout_s, c.max_rollout_s, run.rollout_s <= c.max_rollout_s,
            f"{r} ({mode} decode of the whole batch{in_waves})", "<=", t)
    if c.min_sequences_fit is not None:
        add("min_sequences_fit", fit, c.min_sequences_fit, fit >= c.min_sequences_fit, f"{fit} sequences", ">=",
            str(c.min_sequences_fit))
    if c.cascade_chosen is not None:
        chosen = mode == "cascade" and speedup >= PAYS_THRESHOLD
        add("cascade_chosen", chosen, c.cascade_chosen, chosen == c.cascade_chosen,
            f"{chosen} ({shown} over the run)", "==", str(c.cascade_chosen))
    if c.vllm_uses_cascade is not None:
        used = engine.opted_in.used
        add("vllm_uses_cascade", used, c.vllm_uses_cascade, used == c.vllm_uses_cascade,
            f"{used} (opted in; {engine.opted_in.stage})", "==", str(c.vllm_uses_cascade))
    return out
