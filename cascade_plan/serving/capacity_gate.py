"""The CI gate behind `check`: each workload's thresholds (its `checks:` section, overridden by the
caller's), judged on the planner's estimate, the memory capacity and vLLM's choice. Returns data; the
caller renders it (text, JSON, JUnit, markdown) and sets the exit status."""

from __future__ import annotations

from dataclasses import dataclass, field

import msgspec

from cascade_plan.errors import InputError
from cascade_plan.inputs.choices import ParamsChoice
from cascade_plan.inputs.workload import Checks, Scenario


@dataclass
class GateResult:
    """Per checked workload, its checks in order; the workloads with none; each one's GPU."""

    results: dict[str, list] = field(default_factory=dict)        # workload name -> [CheckResult]
    unchecked: list[str] = field(default_factory=list)
    hardware: dict[str, str] = field(default_factory=dict)       # workload name -> hardware id
    labels: list[str] = field(default_factory=list)              # the numbers each checked workload rests on
    modes: list[str] = field(default_factory=list)
    # workload name -> the cheapest configuration that meets its failed latency or rollout checks (a capacity
    # search), in one line
    suggestions: dict[str, str] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return "; ".join(dict.fromkeys(self.labels))

    @property
    def mode(self) -> str:
        return ",".join(dict.fromkeys(self.modes))

    @property
    def failed(self) -> int:
        return sum(not c.passed for r in self.results.values() for c in r)

    @property
    def checked(self) -> int:
        return sum(len(r) for r in self.results.values())


TIME_CHECKS = ("max_tpot_ms", "max_rollout_s", "max_step_s", "max_run_s")


def cheapest_passing(scn: Scenario, checks: Checks, reserve: float) -> str:
    """The capacity search's answer for the workload's latency and rollout checks: the fewest GPUs (of every
    calibrated kind and the workload's own) that meet them all."""
    from cascade_plan.serving.workload_analysis import capacity_search

    return capacity_search(msgspec.structs.replace(scn, checks=checks), reserve)[1]


def run_gate(scenarios: list, choice: ParamsChoice, thresholds: dict, reserve: float = 0.10, margin: bool = False,
             attention_backend: str | None = None) -> GateResult:
    """Judge every scenario. `thresholds` (the Checks fields; None leaves a workload's own) win over each
    workload's `checks:`. Every scenario's cost parameters are chosen before any is judged, so bad input is
    refused first; InputError when nothing at all is checked."""
    from cascade_plan.cost.capacity import capacity
    from cascade_plan.engine.checks import has_checks, merge_checks, run_checks
    from cascade_plan.engine.engine_gate import engine_view
    from cascade_plan.planning.params_select import select_params
    from cascade_plan.planning.verdict_evidence import assess
    from cascade_plan.serving.capacity_search import own_run

    chosen = [select_params(s, choice) for s in scenarios]
    gate = GateResult()
    for scn, params in zip(scenarios, chosen):
        checks = merge_checks(scn.checks, **thresholds)
        gate.hardware[scn.name] = scn.hardware.id
        if not has_checks(checks):
            gate.unchecked.append(scn.name)
            continue
        est = assess(scn, params, reserve)
        timed = checks.max_tpot_ms is not None or checks.max_rollout_s is not None
        waves = own_run(scn, params, reserve) if timed else None
        results = run_checks(est, capacity(scn, reserve, est.flat), engine_view(est, attention_backend), checks,
                             margin, waves)
        gate.results[scn.name] = results
        if any(not r.passed and r.name in TIME_CHECKS for r in results):
            gate.suggestions[scn.name] = cheapest_passing(scn, checks, reserve)
        gate.labels.append(params.label)
        gate.modes.append(params.mode)
    if not gate.results:
        which = "the workload has no" if len(scenarios) == 1 else "none of the workloads has a"
        raise InputError(f"nothing to check: {which} `checks:` section and no threshold option was given "
                         "(see cascade-plan check --help)")
    return gate
