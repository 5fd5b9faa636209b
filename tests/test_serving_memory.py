"""rl and route against KV memory: a batch that does not fit runs in waves of what fits (or preempts
siblings), the output says which, and `what fits` is estimate's number."""

import json

import pytest
from typer.testing import CliRunner

from cascade_plan.cli.app import app
from cascade_plan.inputs.workload import TreeNode
from cascade_plan.serving.memory_waves import FITS, NO_ROOM, PREEMPTS, WAVES, pack_prompts, uniform_waves

runner = CliRunner()


def run_json(*args):
    res = runner.invoke(app, [str(a) for a in args] + ["--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def estimate_doc(*args):
    return run_json("estimate", "--model", "llama-3-8b", "--hardware", "h100-sxm", *args)


def prompt(tokens, *leaves):
    return TreeNode(tokens=tokens, children=[TreeNode(samples=n, output_tokens=out) for n, out in leaves])


def test_pack_prompts_by_hand():
    groups = [prompt(100, (2, 50)), prompt(100, (2, 50)), prompt(10, (1, 30))]     # 200, 200, 40 tokens
    assert pack_prompts(groups, 440)[0] == FITS
    mode, waves = pack_prompts(groups, 400)
    assert mode == WAVES and [len(w) for w in waves] == [2, 1]
    mode, waves = pack_prompts(groups, 250)
    assert mode == WAVES and [len(w) for w in waves] == [1, 2]
    # a group of 100 + 4 x 50 = 300 tokens in 220: siblings preempted, two waves of 2 each re-reading the prompt
    mode, waves = pack_prompts([prompt(100, (3, 50), (1, 50))], 220)
    assert mode == PREEMPTS
    assert ([[(leaf.samples, leaf.output_tokens) for leaf in w[0].children] for w in waves]
            == [[(2, 50)], [(1, 50), (1, 50)]])
    assert all(w[0].tokens == 100 for w in waves)
    assert pack_prompts([prompt(100, (1, 50))], 149)[0] == NO_ROOM
    # without prefix caching every sequence holds the prompt: 2 x 150 = 300 per group
    assert pack_prompts(groups[:1], 299, prefix_caching=False)[0] == PREEMPTS
    assert pack_prompts(groups[:1], 300, prefix_caching=False)[0] == FITS


def test_uniform_waves_by_hand():
    assert uniform_waves(4, 2, 100, 50, 800) == (FITS, [(1, 4, 2)])
    assert uniform_waves(5, 2, 100, 50, 450) == (WAVES, [(2, 2, 2), (1, 1, 2)])
    assert uniform_waves(2, 4, 100, 50, 220) == (PREEMPTS, [(4, 1, 2)])
    assert uniform_waves(2, 5, 100, 50, 220) == (PREEMPTS, [(4, 1, 2), (2, 1, 1)])
    assert uniform_waves(1, 1, 100, 50, 120)[0] == NO_ROOM


RL = ["rl", "--model", "llama-3-8b", "--hardware", "h100-sxm", "--prompts", 512, "--samples", 16, "--replicas", 8]


def rollout_yaml(path, prompts):
    """One replica's rollout as rl builds it: a root over `prompts` prompt nodes, 16 completions each."""
    kids = ", ".join("{tokens: 2048, children: [{samples: 16, output_tokens: 1024}]}" for _ in range(prompts))
    path.write_text(f"schema_version: 1\nmodel: llama-3-8b\nhardware: h100-sxm\n"
                    f"tree: {{tokens: 0, children: [{kids}]}}\n")
    return path


def test_rl_batch_that_does_not_fit_runs_in_waves_of_what_estimate_says_fits(tmp_path):
    # fixed lengths: each replica's rollout is estimate's --prefix 2048 --groups 64 --samples 16 --output-tokens 1024
    doc = run_json(*RL, "--prompt-cv", 0, "--completion-cv", 0, "--sampled-steps", 1)
    est = estimate_doc("--prefix", 2048, "--groups", 64, "--samples", 16, "--output-tokens", 1024)
    m = doc["memory_per_replica"]
    assert est["memory"]["fits"] is False
    assert m["max_sequences_at_once"] == est["memory"]["max_sequences"] == 405
    assert (m["mode"], m["sequences"], m["waves"], m["largest_wave_sequences"]) == ("waves", 1024, 3, 400)
    # 25 + 25 + 14 prompt groups, one after another, each priced as estimate prices that rollout
    waves = [run_json("estimate", rollout_yaml(tmp_path / f"w{g}.yaml", g))["run"] for g in (25, 14)]
    want_ps = 2 * waves[0]["per_sequence_s"] + waves[1]["per_sequence_s"]
    want_cas = 2 * waves[0]["cascade_s"] + waves[1]["cascade_s"]
    got = doc["generation_per_rl_step"]
    assert got["per_sequence_s"] == pytest.approx(want_ps, rel=1e-9)
    assert got["cascade_s"] == pytest.approx(want_cas, rel=1e-9)
    assert run_json("estimate", rollout_yaml(tmp_path / "all.yaml", 64))["memory"]["max_sequences"] == 405


def test_rl_reproducer_says_what_fits():
    res = runner.invoke(app, [str(a) for a in RL + ["--sampled-steps", 2]])
    assert res.exit_code == 0, res.output
    assert "KV memory per replica:" in res.stdout and "sequences fit at once" in res.stdout
    assert "waves of whole sibling groups" in res.stdout


ROUTE = ["route", "--model", "llama-3-8b", "--hardware", "h100-sxm", "--requests", 20_000]


def test_route_batch_that_does_not_fit_is_priced_in_waves():
    doc = run_json(*ROUTE, "--batch", 256)
    rr = {p["policy"]: p for p in doc["policies"]}["round-robin"]
    assert (rr["groups_per_replica_batch"], rr["siblings_per_group"]) == (128, 2)
    est = estimate_doc("--prefix", 4096, "--groups", 128, "--samples", 2, "--output-tokens", 1024)
    m = rr["memory"]
    assert m["max_sequences_at_once"] == est["memory"]["max_sequences"] < 256
    per_wave = m["max_sequences_at_once"] // 2          # whole groups of 2 that fit at once
    full, rest = divmod(128, per_wave)
    assert (m["mode"], m["waves"]) == ("waves", full + (rest > 0))
    a = estimate_doc("--prefix", 4096, "--groups", per_wave, "--samples", 2, "--output-tokens", 1024)["run"]
    b = estimate_doc("--prefix", 4096, "--groups", rest, "--samples", 2, "--output-tokens", 1024)["run"]
    assert rr["per_sequence_s"] == pytest.approx(full * a["per_sequence_s"] + b["per_sequence_s"], rel=1e-9)
    assert rr["cascade_s"] == pytest.approx(full * a["cascade_s"] + b["cascade_s"], rel=1e-9)
    pa = {p["policy"]: p for p in doc["policies"]}["prefix-aware"]
    assert pa["memory"]["mode"] == "fits"        # 16 groups of 16 store the prompt 16 times, not 128
    text = runner.invoke(app, [str(a) for a in ROUTE + ["--batch", 256]])
    assert "round-robin: " in text.stdout and "sequences fit at once" in text.stdout and "waves" in text.stdout


def test_route_group_too_large_preempts_siblings():
    doc = run_json(*ROUTE, "--batch", 1024, "--samples", 1024, "--forks-together")
    pa = {p["policy"]: p for p in doc["policies"]}["prefix-aware"]
    m = pa["memory"]
    assert (pa["groups_per_replica_batch"], m["mode"]) == (1, "preempts")
    assert m["largest_wave_sequences"] <= m["max_sequences_at_once"] < 1024 and m["waves"] > 1
