"""One workload's whole analysis, as a report section needs it: the estimate with its verdict evidence,
memory capacity, vLLM's choice, the breakeven sweep, the workload on other GPUs, and each calibrated
backend beside the ideal. Computed without writing anything; render/report.py formats it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import msgspec
import numpy as np

from cascade_plan.cost.breakeven import BreakevenResult
from cascade_plan.cost.capacity import Capacity
from cascade_plan.cost.cost_params import CostParams
from cascade_plan.cost.estimate import Estimate
from cascade_plan.engine.engine_gate import EngineView
from cascade_plan.inputs.choices import ParamsChoice
from cascade_plan.inputs.hardware import HardwareProfile
from cascade_plan.inputs.workload import Scenario
from cascade_plan.serving.capacity_answer import Launch
from cascade_plan.serving.capacity_search import SearchResult


@dataclass
class WorkloadReport:
    est: Estimate
    cap: Capacity
    engine: EngineView
    breakeven: BreakevenResult
    plots: dict[str, str] = field(default_factory=dict)          # caption -> relative path
    hardware_estimates: list[Estimate] = field(default_factory=list)
    backend_estimates: list[Estimate] = field(default_factory=list)     # calibrated backends, then ideal
    capacity: SearchResult | None = None       # which GPUs, TP and batch meet the workload's latency checks
    capacity_answer: str = ""
    capacity_launch: Launch | None = None
    hardware_left_out: list[str] = field(default_factory=list)   # comparison GPUs that cannot price it: why


def with_own_gpu(scn: Scenario, compare_hw: list[HardwareProfile]) -> list[HardwareProfile]:
    """The GPUs to compare against, with a what-if GPU added beside the real ones it is compared with."""
    known = {h.id for h in compare_hw}
    return compare_hw + [scn.hardware] if compare_hw and scn.hardware.id not in known and \
        "user-supplied" in scn.hardware.id else compare_hw


def analyse_workload(scn: Scenario, params: CostParams, compare_hw: list[HardwareProfile], choice: ParamsChoice,
                     prefix_axis: np.ndarray, batch_axis: np.ndarray, reserve: float = 0.10,
                     attention_backend: str | None = None) -> WorkloadReport:
    """Everything a report section needs for `scn` under `params`; the breakeven sweeps `prefix_axis` x
    `batch_axis` at the workload's middle-step suffix; the other GPUs take `choice` (each its own best source),
    the workload's own GPU keeps `params`."""
    from cascade_plan.cost.breakeven import run_breakeven, workload_axes
    from cascade_plan.cost.capacity import capacity
    from cascade_plan.cost.estimate import estimate
    from cascade_plan.engine.engine_gate import engine_view
    from cascade_plan.planning.params_select import backend_unpriced, params_for_gpu, select_params
    from cascade_plan.planning.verdict_evidence import assess

    est = assess(scn, params, reserve)
    groups, suffix = workload_axes(scn)
    be = run_breakeven(scn, params, prefix_axis, batch_axis, [suffix], groups, reserve)

    # Other GPUs: through the same path as `estimate` and `compare` (each GPU's own best source, or what
    # the user asked for); the workload's own GPU keeps the numbers it was given.
    hw_ests, left_out = [], []
    for h in compare_hw:
        other = msgspec.structs.replace(scn, hardware=h)
        why = None if h.id == scn.hardware.id else backend_unpriced(other, choice)
        if why is not None:           # a default comparison GPU the asked kernels were never calibrated on
            left_out.append(why)
            continue
        p = params if h.id == scn.hardware.id else params_for_gpu(other, choice)
        hw_ests.append(assess(other, p, reserve))
    backend_ests = []
    if params.mode == "calibrated":
        from cascade_plan.calibration.calibration_file import load_probe
        from cascade_plan.planning.params_select import calibrated_for

        assert params.source is not None                 # calibrated numbers come from a file
        probe = load_probe(Path(params.source))
        backends = probe.fitted["kv_dtypes"].get(scn.kv_dtype) or probe.fitted["kv_dtypes"]["bf16"]
        backend_ests = [estimate(scn, calibrated_for(probe, b, scn.kv_dtype, scn.hardware, scn.model))
                        for b in backends]
        backend_ests.append(estimate(scn, select_params(None, ParamsChoice(ideal=True))))
    search, answer, how = capacity_search(scn, reserve)
    return WorkloadReport(est=est, cap=capacity(scn, reserve, est.flat), engine=engine_view(est, attention_backend),
                          breakeven=be, hardware_estimates=hw_ests, backend_estimates=backend_ests, capacity=search,
                          capacity_answer=answer, capacity_launch=how, hardware_left_out=left_out)


def capacity_search(scn: Scenario, reserve: float = 0.10) -> tuple[SearchResult, str, Launch | None]:
    """`cascade-plan capacity` for the workload over every calibrated GPU and its own, against the latency and
    rollout checks its `checks:` section holds (none: every configuration that fits meets them): the search, its
    one-line answer and the best candidate's launch line."""
    from cascade_plan.inputs.hardware import load_hardware
    from cascade_plan.serving.capacity_answer import best_estimate, launch, one_line_answer
    from cascade_plan.serving.capacity_search import SearchSpace, Targets, default_hardware_ids, search

    ids = list(dict.fromkeys(default_hardware_ids() + [scn.hardware.id]))
    hws = tuple(scn.hardware if h == scn.hardware.id else load_hardware(h) for h in ids)
    c = scn.checks
    targets = Targets() if c is None else Targets(
        tpot_s=None if c.max_tpot_ms is None else c.max_tpot_ms * 1e-3, worst_step_s=c.max_step_s,
        rollout_s=min((v for v in (c.max_rollout_s, c.max_run_s) if v is not None), default=None))
    result = search(scn, SearchSpace(hardware=hws, reserve_fraction=reserve), targets)
    best = result.best
    how = launch(scn, best, best_estimate(scn, result, best, reserve)) if best is not None else None
    return result, one_line_answer(result), how
