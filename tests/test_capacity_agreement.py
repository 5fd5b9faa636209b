"""Two answers to one question agree: every capacity candidate's mean step (TPOT) is `estimate`'s mean step
(run time / decode steps) for that configuration, and its `fits` and `sequences` are `estimate`'s memory answer,
for every shipped workload on every calibrated GPU and one without a calibration (uncalibrated defaults)."""

import pytest

from cascade_plan.cost.estimate import estimate
from cascade_plan.inputs.hardware import load_hardware
from cascade_plan.inputs.workload import load_scenario
from cascade_plan.planning.params_select import select_params
from cascade_plan.serving.capacity_search import (
    SearchSpace,
    Targets,
    candidate_choice,
    candidate_scenario,
    default_hardware_ids,
    search,
)

SHIPPED = ["rl-rollouts-64", "system-prompt-document-samples", "short-prompt-long-reasoning", "parallel-sampling-n8",
           "beam-search", "deepseek-v3-grpo-tp8"]
GPUS = default_hardware_ids() + ["mi300x"]


def _sample(cands):
    """One candidate per (TP, sequences at once), cycling through kernels, KV dtypes and cascade on/off so that
    every one of them is checked somewhere; every candidate that does not fit."""
    seen, out = {}, []
    for c in cands:
        key = (c.tp, c.sequences)
        n = seen.get(key, 0)
        seen[key] = n + 1
        if n == 0 or not c.fits or (n == 3 and c.kv_dtype == "fp8"):
            out.append(c)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name", SHIPPED)
def test_every_candidate_is_estimates_answer(name):
    scn = load_scenario(name)
    checked = set()
    for hw in GPUS:
        res = search(scn, SearchSpace(hardware=(load_hardware(hw),)), Targets())
        if not res.candidates:          # DeepSeek-V3's weights on 8 or fewer A100s or L40Ss: nothing to price
            assert any("weights do not fit" in n for n in res.notes), (name, hw, res.notes)
            continue
        for c in _sample(res.candidates):
            at = candidate_scenario(scn, res, c)
            est = estimate(at, select_params(at, candidate_choice(c)))
            run = est.run_cascade_s if c.cascade else est.run_per_sequence_s
            assert c.tpot_s == pytest.approx(run / est.decode_steps, rel=5e-3), (name, hw, c)
            assert c.tpot_s == pytest.approx(run / est.decode_steps, rel=1e-9)        # the same numbers, in fact
            assert c.fits == est.memory.fits and c.sequences == est.memory.sequences, (name, hw, c)
            if c.waves == 1:
                assert c.rollout_s == pytest.approx(run, rel=1e-9)
                worst = est.costs.cas_step_s if c.cascade else est.costs.ps_step_s
                assert c.worst_step_s == pytest.approx(float(worst.max()), rel=1e-9)
            checked.add((c.backend, c.kv_dtype, c.cascade, c.source))
    assert {s for *_, s in checked} >= {"imported", "uncalibrated"}
    assert any(b == "triton" for b, *_ in checked) and {cas for _, _, cas, _ in checked} == {True, False}
