"""The CI gate behind `check`: each workload's thresholds (its `checks:` section, overridden by the
caller's), judged on the planner's estimate, the memory capacity and vLLM's choice. Returns data; the
caller renders it (text, JSON, JUnit, markdown) and sets the exit status."""

from __future__ import annotations

from dataclasses import dataclass, field

from cascade_plan.errors import InputError
from cascade_plan.inputs.choices import ParamsChoice


@dataclass
class GateResult:
    """Per checked workload, its checks in order; the workloads with none; each one's GPU."""

    results: dict[str, list] = field(default_factory=dict)        # workload name -> [CheckResult]
    unchecked: list[str] = field(default_factory=list)
    hardware: dict[str, str] = field(default_factory=dict)       # workload name -> hardware id
    labels: list[str] = field(default_factory=list)              # the numbers each checked workload rests on
    modes: list[str] = field(default_factory=list)

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


def run_gate(scenarios: list, choice: ParamsChoice, thresholds: dict, reserve: float = 0.10, margin: bool = False,
             attention_backend: str | None = None) -> GateResult:
    """Judge every scenario. `thresholds` (the Checks fields; None leaves a workload's own) win over each
    workload's `checks:`. Every scenario's cost parameters are chosen before any is judged, so bad input is
    refused first; InputError when nothing at all is checked."""
    from cascade_plan.calibration.params_select import select_params
    from cascade_plan.calibration.verdict_evidence import assess
    from cascade_plan.cost.capacity import capacity
    from cascade_plan.engine.checks import has_checks, merge_checks, run_checks
    from cascade_plan.engine.engine_gate import engine_view

    chosen = [select_params(s, choice) for s in scenarios]
    gate = GateResult()
    for scn, params in zip(scenarios, chosen):
        checks = merge_checks(scn.checks, **thresholds)
        gate.hardware[scn.name] = scn.hardware.id
        if not has_checks(checks):
            gate.unchecked.append(scn.name)
            continue
        est = assess(scn, params, reserve)
        gate.results[scn.name] = run_checks(est, capacity(scn, reserve, est.flat), engine_view(est, attention_backend),
                                            checks, margin)
        gate.labels.append(params.label)
        gate.modes.append(params.mode)
    if not gate.results:
        which = "the workload has no" if len(scenarios) == 1 else "none of the workloads has a"
        raise InputError(f"nothing to check: {which} `checks:` section and no threshold option was given "
                         "(see cascade-plan check --help)")
    return gate
