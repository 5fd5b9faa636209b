"""Routing across replicas and RL rollout time: known answers, consistent hashing, CLI."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from cascade_plan import ParamsChoice, estimate, load_scenario, select_params
from cascade_plan.cli.app import app
from cascade_plan.serving.rl import RlSchedule, rl_generation
from cascade_plan.serving.routing import (
    POLICIES,
    Stream,
    co_resident,
    consistent_hash,
    least_loaded,
    make_stream,
    route,
)

runner = CliRunner()


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_co_resident_by_hand():
    # group 0: three requests on replica 0 at [0,1), [0.5,1.5), [2,3); one on replica 1 at [0,1)
    s = Stream(group=np.array([0, 0, 0, 0]), start_s=np.array([0.0, 0.5, 2.0, 0.0]), duration_s=np.ones(4))
    got = co_resident(s, np.array([0, 0, 0, 1]), 2)
    assert got.tolist() == [2, 2, 1, 1]


def test_siblings_per_policy_known_answers():
    s = make_stream(16_000, 16, rate_per_s=8 * 64, duration_s=1.0)
    by = {p: route(s, 8, p) for p in POLICIES}
    assert by["round-robin"].siblings_mean == 2.0            # 16 siblings dealt over 8 replicas
    assert by["prefix-aware"].siblings_mean == 16.0 and by["prefix-aware"].prefix_copies == 1.0
    assert by["round-robin"].prefix_copies == 8.0
    assert 1.0 < by["random"].siblings_mean < 4.0 and by["random"].alone_share > 0
    assert by["least-loaded"].load_imbalance < 1.01
    for p in POLICIES:
        together = route(s, 8, p, forks_together=True)
        assert together.siblings_mean == 16.0 and together.alone_share == 0.0


def _least_loaded_by_scan(start_s, duration_s, replicas):
    """The policy read literally: free the finished, then the first replica with the fewest running."""
    import heapq

    out, active, finishing = [], [0] * replicas, []
    for now, dur in zip(start_s.tolist(), duration_s.tolist()):
        while finishing and finishing[0][0] <= now:
            active[heapq.heappop(finishing)[1]] -= 1
        r = active.index(min(active))
        active[r] += 1
        out.append(r)
        heapq.heappush(finishing, (now + dur, r))
    return out


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 70), st.integers(1, 2000), st.sampled_from([0.0, 0.5, 3.0, 1000.0]), st.integers(0, 9))
def test_least_loaded_is_the_literal_scan(replicas, n, cv, seed):
    s = make_stream(n, 4, rate_per_s=replicas * 8, duration_s=1.0, duration_cv=cv, seed=seed)
    assert least_loaded(s.start_s, s.duration_s, replicas).tolist() == _least_loaded_by_scan(s.start_s, s.duration_s,
                                                                                             replicas)


def test_least_loaded_ties_and_instant_requests():
    # all at t=0; request 2 ends the instant it starts, so request 3 takes its replica (0) again
    start, dur = np.zeros(5), np.array([1.0, 1.0, 0.0, 1.0, 1.0])
    assert least_loaded(start, dur, 3).tolist() == _least_loaded_by_scan(start, dur, 3) == [0, 1, 2, 2, 0]


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 40))
def test_consistent_hashing_moves_few_keys_when_a_replica_joins(r):
    keys = np.arange(20_000)
    a, b = consistent_hash(keys, r), consistent_hash(keys, r + 1)
    assert a.max() < r and b.max() <= r
    moved = (a != b).mean()
    assert moved <= 3.0 / (r + 1)                             # ~1/(r+1) in expectation
    assert np.all(b[a != b] == r)                             # keys only move to the new replica


def route_json(*args):
    res = run("route", "--model", "llama-3-8b", "--hardware", "h100-sxm", "--requests", 20_000, "--json", *args)
    assert res.exit_code == 0, res.output
    return {p["policy"]: p for p in json.loads(res.stdout)["policies"]}


def test_route_prefix_aware_keeps_the_speedup_and_the_memory():
    rows = route_json("--ideal", "--replicas", 8, "--samples", 16, "--batch", 64)
    pa, rr = rows["prefix-aware"], rows["round-robin"]
    assert pa["groups_per_replica_batch"] == 4 and pa["siblings_per_group"] == 16
    assert rr["groups_per_replica_batch"] == 32 and rr["siblings_per_group"] == 2
    assert pa["speedup"] > rr["speedup"] > 1.0
    assert pa["max_sequences_per_replica"] > rr["max_sequences_per_replica"]


def test_route_plot(tmp_path):
    res = run("route", "--model", "llama-3-8b", "--requests", 5_000, "--plot", tmp_path)
    assert res.exit_code == 0, res.output
    assert (tmp_path / "route-speedup-vs-replicas.png").stat().st_size > 10_000


@pytest.mark.parametrize("args, text", [
    ([], "--model"),
    (["--model", "llama-3-8b", "--batch", 8, "--rate", 10], "--batch or --rate"),
    (["--model", "llama-3-8b", "--rate", 1e9], "--rate"),
    (["--model", "no-such-model"], "no-such-model"),
])
def test_route_bad_input(args, text):
    res = run("route", *args)
    assert res.exit_code == 2 and len(res.stderr.strip().splitlines()) == 1 and text in res.stderr


def test_route_rate_gives_littles_law_batch():
    res = run("route", "--model", "llama-3-8b", "--rate", 10, "--replicas", 4, "--requests", 2_000, "--json")
    doc = json.loads(res.stdout)
    assert 1 < doc["batch_per_replica"] < 1000


def test_rl_fixed_lengths_is_estimate(root):
    scn = load_scenario(root / "workloads/rl-rollouts-64.yaml")
    p = select_params(scn, ParamsChoice(ideal=True))
    res = rl_generation(scn, p, RlSchedule(prompts=4, samples=64, prompt_tokens=4096, completion_tokens=1024,
                                           max_completion=4096, replicas=2), sampled_steps=1)
    est = estimate(scn, p)        # 2 prompts x 64 per replica: the seed's batch
    assert res.per_sequence_s == pytest.approx(est.run_per_sequence_s)
    assert res.cascade_s == pytest.approx(est.run_cascade_s)
    assert res.tail_per_sequence_s == 0.0 and res.longest_completion == 1024
    assert res.saved_per_1000_steps_s == pytest.approx(1000 * (est.run_per_sequence_s - est.run_cascade_s))


def test_rl_long_tail_costs_and_cli():
    res = run("rl", "--model", "llama-3-8b", "--ideal", "--prompts", 16, "--samples", 8, "--replicas", 2,
              "--completion-cv", 0.8, "--max-completion", 4096, "--other-s", 10, "--sampled-steps", 2, "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    tail = doc["long_tail"]
    assert tail["longest_completion_tokens"] > 2 * tail["median_completion_tokens"]
    assert 0 < tail["tail_share_per_sequence"] < 1
    g = doc["generation_per_rl_step"]
    assert doc["saved_per_1000_rl_steps_s"] == pytest.approx(1000 * (g["per_sequence_s"] - g["cascade_s"]))
    assert doc["rl_step"]["per_sequence_s"] == pytest.approx(g["per_sequence_s"] + 10)
    text = run("rl", "--model", "llama-3-8b", "--ideal", "--prompts", 4, "--samples", 4, "--replicas", 2,
               "--sampled-steps", 1)
    assert "per 1,000 RL steps" in text.stdout


def test_route_takes_the_mix_from_a_log(root, tmp_path):
    log = tmp_path / "sim.jsonl"
    run("simulate-log", root / "workloads/rl-rollouts-64.yaml", "--out", log)
    res = run("route", "--model", "llama-3-8b", "--log", log, "--requests", 64 * 300, "--replicas", 4, "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["samples"] == 64 and doc["prefix_tokens"] == 4096 and doc["output_tokens"] == 1024
    pa = {p["policy"]: p for p in doc["policies"]}["prefix-aware"]
    assert pa["siblings_mean"] == 64
    res = run("route", "--model", "llama-3-8b", "--log", log, "--samples", 8)
    assert res.exit_code == 2 and "--samples" in res.stderr
