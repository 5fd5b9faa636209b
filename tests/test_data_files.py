"""Every shipped data file loads, and every profile has a source for every number."""

import pytest

from cascade_plan import DEFAULT, estimate, load_hardware, load_scenario
from cascade_plan.inputs.hardware import NUMBER_FIELDS, builtin_hardware_ids
from cascade_plan.resources import data_dir

WORKLOADS = sorted(data_dir("workloads").glob("*.yaml"))


def test_the_issue_workloads_are_shipped():
    names = {p.stem for p in WORKLOADS}
    assert {"rl-rollouts-64", "system-prompt-document-samples", "short-prompt-long-reasoning",
            "parallel-sampling-n8", "beam-search"} <= names


@pytest.mark.parametrize("path", WORKLOADS, ids=lambda p: p.stem)
def test_workload_loads_and_estimates(path):
    assert path.read_text().startswith("#"), "each workload starts with a comment saying what it represents"
    est = estimate(load_scenario(path), DEFAULT)
    assert est.run_per_sequence_s > 0 and est.run_cascade_s > 0


@pytest.mark.parametrize("hw", builtin_hardware_ids())
def test_hardware_profile_loads_with_sources(hw):
    prof = load_hardware(hw)
    assert prof.id == hw
    for field in NUMBER_FIELDS:
        if getattr(prof, field) is not None:
            assert prof.sources[field].strip()


def test_short_prompt_long_reasoning_is_where_cascade_cannot_help():
    est = estimate(load_scenario(data_dir("workloads") / "short-prompt-long-reasoning.yaml"), DEFAULT)
    assert est.run_speedup < 1.05 and est.verdict.level == "no-go"
