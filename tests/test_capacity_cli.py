"""`cascade-plan capacity`, `check`'s latency and rollout checks, and the report's capacity section: the JSON
document, the 80-column table, exit codes, one-line refusals, the plot, and answers that agree across commands."""

import json

import jsonschema
import pytest

from cascade_plan.serving.capacity_search import JSON_FIELDS

from cli_support import ROOT, refused, run

H200_ONLY = ("--hardware", "h200", "--kv-dtype", "bf16")


def _json(*args):
    res = run("capacity", *args, "--json")
    return res, (json.loads(res.stdout) if res.stdout.strip() else None)


def test_json_candidates_have_exactly_the_documented_keys_best_first():
    res, doc = _json("rl-rollouts-64", "--tpot-ms", "12", *H200_ONLY)
    assert res.exit_code == 0, res.output
    assert all(tuple(c) == JSON_FIELDS for c in doc["candidates"])
    assert doc["best"] == doc["candidates"][0] and doc["best"]["meets"]
    assert doc["targets"]["tpot_s"] == pytest.approx(0.012)
    assert doc["launch"]["command"].startswith("vllm serve meta-llama/Meta-Llama-3-8B -tp ")
    schema = json.loads((ROOT / "schemas/capacity.schema.json").read_text())
    jsonschema.validate(doc, schema)


def test_the_answer_line_and_the_launch_line(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    res = run("capacity", "rl-rollouts-64", "--tpot-ms", "9.5", *H200_ONLY)
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    text = " ".join(res.stdout.split())
    # the probe's H200 numbers: cascade on meets a 9.5 ms mean step on fewer GPUs than per-sequence decode does
    assert "Answer: 1 x H200, triton, cascade on, bf16 KV:" in text and "cascade off needs 2 GPUs" in text
    assert "Launch: vllm serve meta-llama/Meta-Llama-3-8B -tp 1 --kv-cache-dtype auto --max-num-seqs 128 " \
           "--no-disable-cascade-attn" in text
    assert "would not cascade the first step" in text          # two different prompts: no prefix common to all
    assert "measured error vs float32: cascade (triton, bf16 KV) max 3.7e-3" in text
    assert "SGLang: no cascade decode on main" in text


def test_no_candidate_meets_exits_1_naming_the_closest():
    res = run("capacity", "rl-rollouts-64", "--tpot-ms", "0.1", *H200_ONLY)
    assert res.exit_code == 1
    err = res.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: no configuration meets every target; the closest is ")
    assert "TPOT misses by" in err[0]


@pytest.mark.parametrize("args,fragment", [
    (("--hardware", "h900"), "h900"),
    (("--hardware", ""), "--hardware: an empty list"),
    (("--hardware", "h200,,b200"), "an empty item"),
    (("--tp", "3"), "--tp: 3 does not divide the 32 query heads of llama-3-8b"),
    (("--tp", "two"), "--tp: 'two' is not a list of whole numbers"),
    (("--tpot-ms", "-5"), "--tpot-ms: -5 is not a positive target"),
    (("--rollout-s", "0"), "--rollout-s: 0 is not a positive target"),
    (("--backend", "cudnn"), "--backend: unknown backend 'cudnn'"),
    (("--weight-dtype", "fp4"), "--weight-dtype: unknown dtype 'fp4'"),
    (("--kv-dtype", "fp6"), "fp6"),
])
def test_bad_input_is_one_line_exit_2(args, fragment):
    refused(run("capacity", "rl-rollouts-64", *args), fragment)


def test_plot_is_written_and_a_folder_is_refused(tmp_path):
    out = tmp_path / "pareto.png"
    res = run("capacity", "beam-search", "--plot", out, *H200_ONLY)
    assert res.exit_code == 0, res.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 20_000
    refused(run("capacity", "beam-search", "--plot", tmp_path, *H200_ONLY), "--plot")


def test_capacity_answer_equals_the_reports(tmp_path):
    from cascade_plan.inputs.workload import load_scenario
    from cascade_plan.serving.workload_analysis import capacity_search

    res, doc = _json("system-prompt-document-samples")
    assert res.exit_code == 0, res.output
    result, answer, how = capacity_search(load_scenario("system-prompt-document-samples"))
    assert answer == doc["answer"] and how.command == doc["launch"]["command"]
    assert [c.to_json() for c in result.candidates[:5]] == doc["candidates"][:5]


def _workload(tmp_path, checks: str):
    p = tmp_path / "w.yaml"
    p.write_text("schema_version: 1\nmodel: llama-3-8b\nhardware: h200\ntree:\n  tokens: 4096\n  copies: 2\n"
                 f"  samples: 64\n  output_tokens: 1024\nchecks:\n{checks}")
    return p


def test_check_max_tpot_fails_with_the_cheapest_configuration_that_passes(tmp_path):
    res = run("check", _workload(tmp_path, "  max_tpot_ms: 9\n"), "--json")
    assert res.exit_code == 1, res.output
    doc = json.loads(res.stdout)
    (c,) = doc["workloads"]["w"]
    # the H200's default kernels (FlashInfer): cascade does not pay there, so the planner picks per-sequence
    assert c["name"] == "max_tpot_ms" and not c["passed"] and c["measured"] > 9
    est = json.loads(run("estimate", tmp_path / "w.yaml", "--json").stdout)
    mode = "cascade_s" if est["run"]["speedup"] >= 1.05 else "per_sequence_s"
    assert c["measured"] == pytest.approx(est["run"][mode] / est["decode_steps"] * 1e3, rel=1e-9)
    suggestion = doc["cheapest_passing"]["w"]
    text = run("check", tmp_path / "w.yaml").stdout
    assert "cheapest configuration that passes (cascade-plan capacity): " + suggestion in " ".join(text.split())
    assert suggestion.startswith("1 x ") and "TPOT" in suggestion


def test_check_max_rollout_passes_and_counts_waves(tmp_path):
    res = run("check", _workload(tmp_path, "  max_rollout_s: 60\n  max_tpot_ms: 50\n"), "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert [c["passed"] for c in doc["workloads"]["w"]] == [True, True] and doc["cheapest_passing"] == {}


def test_a_forest_too_wide_to_search_in_seconds_is_refused_before_pricing(tmp_path):
    import time

    import yaml

    children = [{"tokens": 100 + i, "copies": 1 + i % 3, "samples": 1 + i % 7, "output_tokens": 64 + i % 50}
                for i in range(2047)]
    wl = tmp_path / "forest.yaml"
    wl.write_text(yaml.safe_dump({"schema_version": 1, "model": "llama-3-8b", "tree": {"tokens": 0,
                                                                                     "children": children}}))
    t = time.perf_counter()
    refused(run("capacity", wl), "node x step cells", "narrow it with --hardware")
    assert time.perf_counter() - t < 5
    # narrowed to one configuration it is searched: waves of sibling groups whose forests stay under 64 shapes
    res, doc = _json(wl, "--hardware", "h200", "--tp", "1", "--kv-dtype", "bf16", "--backend", "triton")
    assert res.exit_code == 0, res.output
    assert doc["candidates"] and any("distinct waves of this forest" in n for n in doc["notes"])
