"""The capacity search: waves of whole sibling groups, pricing many waves in one pass, ranking, uncalibrated
candidates judged at the slow end of their measured error, and the answer's words."""

import msgspec
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cascade_plan.cost.cost_model import gpu_shape
from cascade_plan.cost.flat_tree import flatten
from cascade_plan.cost.run_load import tree_run_costs, tree_run_costs_many
from cascade_plan.inputs.choices import ParamsChoice
from cascade_plan.inputs.hardware import load_hardware
from cascade_plan.inputs.workload import TreeNode, load_scenario, total_sequences
from cascade_plan.planning.params_select import select_params
from cascade_plan.planning.time_margin import default_time_errors
from cascade_plan.serving.batch_units import batch_units, composition, wave_sequences, wave_tree, waves_of
from cascade_plan.serving.capacity_answer import model_ref, one_line_answer
from cascade_plan.serving.capacity_search import (
    SearchSpace,
    Targets,
    concurrency_ladder,
    default_hardware_ids,
    own_run,
    rank_key,
    search,
)

SHIPPED = ["rl-rollouts-64", "system-prompt-document-samples", "short-prompt-long-reasoning", "parallel-sampling-n8",
           "beam-search", "deepseek-v3-grpo-tp8"]


def _search(name: str, hw: tuple[str, ...], targets: Targets = Targets(), **space) -> tuple:
    scn = load_scenario(name)
    return scn, search(scn, SearchSpace(hardware=tuple(load_hardware(h) for h in hw), **space), targets)


def test_units_of_the_shipped_trees():
    # two prompts of 64 rollouts; 8 users' documents under one system prompt (4 x 16 sequences each); 24 beams
    for name, total, per in (("rl-rollouts-64", 2, 64), ("system-prompt-document-samples", 8, 64),
                             ("beam-search", 24, 4), ("deepseek-v3-grpo-tp8", 8, 32)):
        u = batch_units(load_scenario(name).tree)
        assert (u.total, u.sequences) == (total, (per,)), name


def test_a_wave_keeps_every_ancestor():
    tree = load_scenario("system-prompt-document-samples").tree
    u = batch_units(tree)
    w = wave_tree(tree, u, ((0, 3),))
    assert w.tokens == 2000 and w.children[0].tokens == 12000 and w.children[0].copies == 3
    assert total_sequences(w) == 3 * 64


forests = st.lists(st.tuples(st.integers(0, 500), st.integers(1, 6), st.integers(1, 5), st.integers(1, 64)),
                   min_size=2, max_size=5)


@given(forests, st.integers(1, 12))
@settings(max_examples=40)
def test_waves_of_a_forest_hold_every_unit_once(kinds, per_wave):
    tree = TreeNode(tokens=0, children=[TreeNode(tokens=t, copies=c, samples=s, output_tokens=o)
                                        for t, c, s, o in kinds])
    u = batch_units(tree)
    shapes = waves_of(u, per_wave)
    assert shapes is not None
    assert sum(n * sum(k for _, k in comp) for comp, n in shapes) == u.total
    assert sum(n * wave_sequences(u, comp) for comp, n in shapes) == total_sequences(tree)
    assert all(sum(k for _, k in comp) <= per_wave for comp, _ in shapes)
    assert composition(u, 0, u.total) == tuple((i, c) for i, (_, c, _, _) in enumerate(kinds))


@pytest.mark.parametrize("name", SHIPPED)
@pytest.mark.parametrize("hw,backend", [("h200", "triton"), ("h200", "flashinfer"), ("a100-80gb", "flashinfer-fa2"),
                                        ("mi300x", None)])
def test_many_runs_in_one_pass_equal_each_run_priced_alone(name, hw, backend):
    scn = msgspec.structs.replace(load_scenario(name), hardware=load_hardware(hw))
    params = select_params(scn, ParamsChoice(backend=backend) if backend else ParamsChoice(uncalibrated=True))
    u = batch_units(scn.tree)
    comps = [c for k in sorted({1, 2, 3, u.total}) if k <= u.total for c, _ in waves_of(u, k)]
    flats = [flatten(wave_tree(scn.tree, u, c)) for c in comps]
    g = gpu_shape(scn.model, scn.hardware, scn.kv_dtype, scn.weight_dtype, scn.tp)
    many = tree_run_costs_many(flats, g, scn.model, scn.weight_dtype, scn.tp, params, scn.prefix_caching)
    for f, m in zip(flats, many):
        one = tree_run_costs(f, g, scn.model, scn.weight_dtype, scn.tp, params, scn.prefix_caching)
        for field in ("ps_step_s", "cas_step_s", "weight_s", "ps_hbm_bytes", "cas_prefix_bytes"):
            np.testing.assert_array_equal(getattr(m.costs, field), getattr(one.costs, field))
        assert m.decode_steps == one.decode_steps and np.array_equal(m.weights, one.weights)


def test_the_ladder_stops_at_the_most_groups_that_fit():
    # beam-search on an L40S: 24 groups of 4 CodeLlama-13B beams; the 26 GB of weights leave room for a few groups
    scn = msgspec.structs.replace(load_scenario("beam-search"), hardware=load_hardware("l40s"))
    ladder = concurrency_ladder(scn, batch_units(scn.tree), 0.10)
    fitting = [k for k, fits in ladder if fits]
    assert ladder[-1] == (24, False) and fitting and fitting == sorted(fitting)
    from cascade_plan.cost.memory_fit import memory_fit

    u = batch_units(scn.tree)
    most = max(fitting)
    for k, fits in ((most, True), (most + 1, False)):
        wave = msgspec.structs.replace(scn, tree=wave_tree(scn.tree, u, ((0, k),)))
        assert memory_fit(wave, 0.10).fits is fits


def test_ranking_meets_first_then_fewest_gpus_then_tokens_per_gpu():
    _, res = _search("rl-rollouts-64", ("h200", "h100-sxm"), Targets(tpot_s=0.012))
    keys = [rank_key(c) for c in res.candidates]
    assert keys == sorted(keys)
    meets = [c.meets for c in res.candidates]
    assert meets == sorted(meets, reverse=True) and any(meets) and not all(meets)
    met = [c for c in res.candidates if c.meets]
    assert all(c.fits and c.tpot_s <= 0.012 for c in met)
    assert [c.gpus for c in met] == sorted(c.gpus for c in met)
    assert res.best is met[0]


def test_cascade_changes_the_answer_for_the_seed_workload():
    # the seed's rollouts on an H200 (probe numbers): per-sequence decode over 4K-token prompts needs more GPUs to
    # reach a 9 ms mean step than the probe's cascade kernels
    _, res = _search("rl-rollouts-64", ("h200",), Targets(tpot_s=0.009), kv_dtypes=("bf16",))
    on, off = res.best_with(True), res.best_with(False)
    assert on is not None and off is not None and on.gpus < off.gpus
    assert one_line_answer(res).endswith(f"cascade off needs {off.gpus} GPUs")


def test_only_cascade_meets_a_rollout_budget_on_the_h200():
    # DeepSeek-V3's rollouts on 8 H200s: no per-sequence configuration decodes the batch within 130 s
    _, res = _search("deepseek-v3-grpo-tp8", ("h200",), Targets(rollout_s=130.0))
    best = res.best
    assert best is not None and best.cascade and res.best_with(False) is None
    assert one_line_answer(res).endswith("; no configuration searched meets the targets with cascade off")


def test_no_candidate_meets_names_the_closest():
    _, res = _search("rl-rollouts-64", ("h200",), Targets(tpot_s=1e-4), kv_dtypes=("bf16",))
    assert res.best is None
    c = res.closest
    assert c is not None and c.fits and c.worst_miss == min(x.worst_miss for x in res.candidates if x.fits)
    line = one_line_answer(res)
    assert line.startswith("no configuration meets every target; the closest is ") and "TPOT misses by" in line


def test_uncalibrated_candidates_meet_only_across_their_whole_error_range():
    errors = default_time_errors()
    assert errors is not None and errors[True].under < 0 < errors[True].over
    scn, res = _search("rl-rollouts-64", ("mi300x",), kv_dtypes=("bf16",), tps=(1,))
    c = next(c for c in res.candidates if c.cascade and c.fits)
    assert c.source == "uncalibrated" and c.backend == "default"
    lo, hi = c.margin["time_range"]
    assert lo < 1 < hi and hi == pytest.approx(1 / (1 + errors[True].under))
    space = dict(kv_dtypes=("bf16",), tps=(1,))
    between = _search("rl-rollouts-64", ("mi300x",), Targets(tpot_s=c.tpot_s * (1 + hi) / 2), **space)[1]
    assert not next(x for x in between.candidates if x.cascade and x.sequences == c.sequences).meets
    above = _search("rl-rollouts-64", ("mi300x",), Targets(tpot_s=c.tpot_s * hi * 1.001), **space)[1]
    assert next(x for x in above.candidates if x.cascade and x.sequences == c.sequences).meets


def test_a_gpu_without_fp8_kv_measurements_is_priced_uncalibrated_and_says_so():
    _, res = _search("rl-rollouts-64", ("a100-80gb",), kv_dtypes=("fp8",), tps=(1,))
    assert {c.source for c in res.candidates} == {"uncalibrated"}
    assert any("a100-80gb" in n and "no fp8 KV" in n for n in res.notes)


def test_own_run_is_the_whole_batch_when_it_fits():
    from cascade_plan.cost.estimate import estimate

    scn = load_scenario("rl-rollouts-64")
    params = select_params(scn)
    est = estimate(scn, params)
    run = own_run(scn, params)
    assert run[True].waves == 1 and run[True].rollout_s == pytest.approx(est.run_cascade_s, rel=1e-12)
    assert run[False].tpot_s == pytest.approx(est.run_per_sequence_s / est.decode_steps, rel=1e-12)


def test_default_hardware_is_every_calibrated_gpu():
    assert set(default_hardware_ids()) == {"a100-80gb", "b200", "b300", "gb200", "gb300", "h100-sxm", "h200", "l40s"}


def test_model_ref_is_the_repo_a_preset_cites():
    assert model_ref(load_scenario("rl-rollouts-64").model) == "meta-llama/Meta-Llama-3-8B"
