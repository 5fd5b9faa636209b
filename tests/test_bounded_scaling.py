"""Work linear in the output: simulate-log, analyze's per-replica tables, --show-bad; each checked
against the plain definition it replaces (the figures: benchmarks/bounded_commands.py)."""

import gzip

import msgspec
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from cascade_plan.inputs.workload import TreeNode
from cascade_plan.logs import simulate


def tree_of(tree: str):
    return msgspec.convert(yaml.safe_load(tree), TreeNode)


def records_by_definition(tree, replica, step_s):
    """Step k holds every sequence with output_tokens >= k, in tree order (the module's docstring)."""
    seqs = simulate.tree_sequences(tree)
    for k in range(1, max(s.output_tokens for s in seqs) + 1):
        rows = [{"request": s.request, "group": s.group, "shared": s.shared, "private": s.private_tokens + k,
                 **({"levels": list(s.levels)} if len(s.levels) > 1 else {})} for s in seqs if s.output_tokens >= k]
        yield {"ts": round(k * step_s, 6), "replica": replica, "step": k, "seqs": rows}


leaf = st.builds(lambda t, s, o, p: f"{{tokens: {t}, samples: {s}, output_tokens: {o}, private_tokens: {p}}}",
                 st.integers(0, 50), st.integers(1, 3), st.integers(1, 12), st.integers(0, 5))
trees = st.recursive(leaf, lambda kids: st.builds(
    lambda t, c, ch: f"{{tokens: {t}, copies: {c}, children: [{', '.join(ch)}]}}",
    st.integers(0, 50), st.integers(1, 2), st.lists(kids, min_size=1, max_size=3)), max_leaves=6)


@settings(max_examples=60, deadline=None)
@given(trees, st.sampled_from(["r0", 'odd "replica" \u00e9', "7"]), st.sampled_from([0.01, 0.013, 1e-7]))
def test_simulated_lines_are_the_definition_byte_for_byte(tree, replica, step_s):
    t = tree_of(tree)
    enc = msgspec.json.Encoder()
    want = [enc.encode(r) + b"\n" for r in records_by_definition(t, replica, step_s)]
    assert list(simulate.encoded_records(t, replica, step_s)) == want
    assert [enc.encode(r) + b"\n" for r in simulate.log_records(t, replica, step_s)] == want
    assert sum(len(r["seqs"]) for r in records_by_definition(t, replica, step_s)) == simulate.log_size(t)[1]


def test_gzip_log_is_the_plain_log(tmp_path):
    t = tree_of("{tokens: 100, children: [{tokens: 10, samples: 30, output_tokens: 3}, "
                "{tokens: 5, samples: 2, output_tokens: 400}]}")
    simulate.write_log(t, tmp_path / "a.jsonl")
    simulate.write_log(t, tmp_path / "a.jsonl.gz")
    plain = (tmp_path / "a.jsonl").read_bytes()
    assert gzip.decompress((tmp_path / "a.jsonl.gz").read_bytes()) == plain
    assert plain.count(b"\n") == 400


def test_one_long_child_costs_its_rows_not_steps_times_sequences():
    # 10,000 one-step sequences beside one 20,000-step sequence: 30,000 rows, not 2 x 10^8 visits
    t = tree_of("{tokens: 100, children: [{tokens: 10, samples: 10000, output_tokens: 1}, "
                "{tokens: 5, samples: 1, output_tokens: 20000}]}")
    runs = list(simulate._active_runs(simulate.tree_sequences(t)))
    assert [(a, b, len(active)) for a, b, active in runs] == [(1, 1, 10001), (2, 20000, 1)]
    assert sum(1 for _ in simulate.encoded_records(t)) == 20000


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c10", "\u00e9", "r2"]), st.floats(0, 1e6), st.floats(0, 1e6)),
                min_size=1, max_size=60))
def test_per_replica_tables_are_each_replica_alone(steps):
    """The grouped figures equal np.quantile / mean / max / sums over each replica's own steps."""
    import numpy as np

    from cascade_plan.logs import analysis
    from cascade_plan.logs.log_costs import StepTimes

    rep = np.array([r for r, _, _ in steps], dtype=object)
    x = np.array([v for _, v, _ in steps])
    ps = np.array([v for _, _, v in steps])
    cas = x / 2 + 1
    t = type("T", (), {"replica": rep})()
    per_replica, verdicts = analysis._by_replica(t, {"batch": x}, StepTimes(ps, cas, np.zeros_like(ps)))
    assert sorted(per_replica) == sorted(set(rep))
    for r in set(rep):
        mine = rep == r
        want = analysis.distribution(x[mine])
        got = per_replica[r]["batch"]
        assert got.quantiles == want.quantiles and got.max == want.max       # bit for bit
        assert got.mean == pytest.approx(want.mean, rel=1e-12, abs=1e-300)
        v, w = verdicts[r], analysis.verdict(StepTimes(ps, cas, np.zeros_like(ps)), mine)
        assert (v.steps, v.steps_paying) == (w.steps, w.steps_paying)
        for f in ("per_sequence_s", "cascade_s", "best_s", "time_paying_s"):
            assert getattr(v, f) == pytest.approx(getattr(w, f), rel=1e-12, abs=1e-300)


def test_json_text_is_json_dumps_indented():
    import json

    from cascade_plan.cli.common import dumps_json

    doc = {"a": [], "b": {}, "c": [1, 2.5, {"x": None, "y": True}], "d": "\u00e9, \"q\": [1, 2]\n", "e": 1e-300,
           "f": 2**70, "g": [[]], "h": {"k": {}}, "i": -0.0, "j": 1e16}
    assert dumps_json(doc) == json.dumps(doc, indent=2)
    assert dumps_json(doc, indent=1) == json.dumps(doc, indent=1)


def test_a_log_of_more_replicas_than_a_fleet_is_answered_overall(tmp_path):
    import json

    from typer.testing import CliRunner

    from cascade_plan.cli.app import app
    from cascade_plan.logs.analysis import MAX_REPLICA_TABLES

    n = MAX_REPLICA_TABLES + 1
    log = tmp_path / "many.jsonl"
    log.write_text("".join(f'{{"ts": 0.01, "replica": "r{i}", "batch": 64, "prefix": 2048, "siblings": 16, '
                           f'"private": 100}}\n' for i in range(n)))
    res = CliRunner().invoke(app, ["analyze", str(log), "--model", "llama-3-8b", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert len(doc["replicas"]) == n and doc["distributions"]["per_replica"] == {}
    assert doc["per_replica_left_out"].startswith(f"{n:,} replicas")
    assert doc["decode_time"]["overall"]["steps"] == n
    text = CliRunner().invoke(app, ["analyze", str(log), "--model", "llama-3-8b"])
    assert text.exit_code == 0 and f"{n:,} replicas: per-replica figures are kept" in text.output


def test_a_chain_deeper_than_a_workload_is_malformed_and_show_bad_is_bounded(tmp_path):
    import json

    from typer.testing import CliRunner

    from cascade_plan.cli.app import app
    from cascade_plan.inputs import limits
    from cascade_plan.logs.log_format import check_record

    def rec(levels):
        return {"ts": 1.0, "replica": "r0", "seqs": [{"request": "q", "group": "/".join(f"h{i}" for i in range(levels)),
                                                      "shared": levels, "private": 1,
                                                      "levels": list(range(1, levels + 1))}]}
    deep, ok = rec(limits.MAX_DEPTH + 1), rec(limits.MAX_DEPTH)
    assert check_record(ok, "seq") is None
    assert "at most 64 levels" in check_record(deep, "seq")
    log = tmp_path / "deep.jsonl"
    log.write_text(json.dumps(ok) + "\n" + json.dumps(deep) + "\n")
    res = CliRunner().invoke(app, ["analyze", str(log), "--model", "llama-3-8b", "--json"])
    doc = json.loads(res.stdout)
    assert (doc["records"], doc["malformed"]) == (2, 1)
    assert doc["malformed_examples"][0]["line"] == 2
    too_many = CliRunner().invoke(app, ["analyze", str(log), "--model", "llama-3-8b", "--show-bad",
                                        str(limits.MAX_SHOW_BAD + 1)])
    assert too_many.exit_code == 2


def test_compare_of_a_wide_tree_on_many_gpus_is_refused_before_pricing(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from cascade_plan.cli.app import app
    from cascade_plan.cost import compare

    kids = ", ".join(f"{{tokens: {10 + i}, samples: 2, output_tokens: {100 + i}}}" for i in range(40))
    w = tmp_path / "w.yaml"
    w.write_text(f"schema_version: 1\nmodel: llama-3-8b\nhardware: h200\ntree: {{tokens: 1000, children: [{kids}]}}\n")
    cells = 41 * 40                              # nodes x distinct output lengths
    monkeypatch.setattr(compare, "MAX_COMPARE_CELLS", 3 * cells)
    ok = CliRunner().invoke(app, ["compare", str(w), "--hardware", "h200,b200,h100-sxm", "--json"])
    assert ok.exit_code == 0, ok.output
    res = CliRunner().invoke(app, ["compare", str(w), "--hardware", "h200,b200", "--kv-dtype", "bf16,fp8", "--json"])
    assert res.exit_code == 2 and "compare at most 3 GPU x KV dtype pairs" in res.output
    assert "Traceback" not in res.output and res.stdout.count("\n") <= 2


if __name__ == "__main__":
    pytest.main([__file__])
