"""Batch logs: simulate -> analyze reproduces estimate; known answers on hand-made logs; every
format and compression; malformed records counted and located; bad input exits 2 with one line."""

import gzip
import json

import duckdb
import pytest
from typer.testing import CliRunner

from cascade_plan.cli.app import app
from cascade_plan.inputs.workload import parse_workload
from cascade_plan.logs.log_format import check_record, json_schema

runner = CliRunner()


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


def analyze_json(*args):
    res = run("analyze", *args, "--json")
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


@pytest.mark.parametrize("name, mode", [("rl-rollouts-64", "--ideal"), ("rl-rollouts-64", "--uncalibrated"),
                                        ("rl-rollouts-64", None), ("system-prompt-document-samples", None)])
def test_simulated_log_reproduces_estimate(root, tmp_path, name, mode):
    wl = root / f"workloads/{name}.yaml"
    log = tmp_path / "sim.jsonl.gz"
    assert run("simulate-log", wl, "--out", log).exit_code == 0
    flags = [mode] if mode else []
    est = json.loads(run("estimate", wl, "--json", *flags).stdout)
    doc = analyze_json(log, "--workload", wl, *flags)
    assert doc["steps"] == est["decode_steps"] and doc["malformed"] == 0
    got = doc["decode_time"]["overall"]
    assert got["speedup"] == pytest.approx(est["run"]["speedup"], rel=1e-9)
    assert got["per_sequence_s"] == pytest.approx(est["run"]["per_sequence_s"], rel=1e-9)
    assert got["cascade_s"] == pytest.approx(est["run"]["cascade_s"], rel=1e-9)


@pytest.mark.parametrize("name", ["rl-rollouts-64", "system-prompt-document-samples", "beam-search"])
def test_summary_workload_is_the_simulated_tree(root, tmp_path, name):
    wl = root / f"workloads/{name}.yaml"
    log, out = tmp_path / "sim.jsonl", tmp_path / "summary.yaml"
    run("simulate-log", wl, "--out", log)
    analyze_json(log, "--workload", wl, "--workload-out", out)
    got, _ = parse_workload(out)
    want, _ = parse_workload(wl)

    def strip(node):
        return {"tokens": node.tokens, "copies": node.copies, "samples": node.samples,
                "output_tokens": node.output_tokens, "private_tokens": node.private_tokens,
                "children": [strip(c) for c in node.children]}

    assert strip(got.tree) == strip(want.tree)
    # the summary is a workload every command takes: estimate on it gives the same run
    a = json.loads(run("estimate", out, "--json").stdout)["run"]["speedup"]
    b = json.loads(run("estimate", wl, "--json").stdout)["run"]["speedup"]
    assert a == pytest.approx(b)


def seq(req, group, shared, private, **kw):
    return {"request": req, "group": group, "shared": shared, "private": private, **kw}


def known_log(tmp_path):
    """Replica a: 2 steps of 8 siblings over a 4096-token prompt (cascade pays); replica b: 2 steps of
    4 sequences sharing nothing (it cannot)."""
    recs = []
    for k in (1, 2):
        recs.append({"ts": k, "replica": "a", "seqs": [seq(f"a{i}", "p", 4096, k) for i in range(8)]})
        recs.append({"ts": k, "replica": "b", "seqs": [seq(f"b{i}", f"u{i}", 0, 100 + k) for i in range(4)]})
    return write_jsonl(tmp_path / "known.jsonl", recs)


def test_known_answers(tmp_path):
    doc = analyze_json(known_log(tmp_path), "--model", "llama-3-8b", "--hardware", "h100-sxm", "--ideal")
    assert doc["steps"] == 4 and doc["replicas"] == ["a", "b"] and doc["requests"] == 12
    d = doc["distributions"]
    assert d["overall"]["batch"]["mean"] == 6 and d["overall"]["batch"]["max"] == 8
    assert d["per_replica"]["a"]["siblings"]["p50"] == 8 and d["per_replica"]["b"]["siblings"]["max"] == 0
    assert d["per_replica"]["a"]["prefix_tokens"]["mean"] == 4096
    assert d["per_replica"]["b"]["private_tokens"]["mean"] == 101.5
    t = doc["decode_time"]
    assert t["per_replica"]["a"]["share_of_steps_where_cascade_pays"] == 1.0
    assert t["per_replica"]["b"]["share_of_steps_where_cascade_pays"] == 0.0
    assert t["overall"]["share_of_steps_where_cascade_pays"] == 0.5
    # ideal mode, hand arithmetic for replica a, step 1: weights 16.06 GB; per-sequence reads
    # 8 x 4097 tokens x 128 KiB, cascade 4096 + 8 x 1 tokens x 128 KiB (merge traffic is left out)
    bw = 3.35e12
    w = 8.03e9 * 2
    kvb = 131072
    ps = (w + 8 * 4097 * kvb) / bw
    cas = (w + (4096 + 8) * kvb) / bw
    a1 = t["per_replica"]["a"]
    assert a1["per_sequence_s"] == pytest.approx(ps + (w + 8 * 4098 * kvb) / bw, rel=2e-3)
    assert a1["cascade_s"] == pytest.approx(cas + (w + (4096 + 16) * kvb) / bw, rel=2e-3)
    assert t["overall"]["projected_saving_s"] == pytest.approx(a1["per_sequence_s"] - a1["cascade_s"], rel=1e-9)


def test_compact_form_prices_like_estimate(root, tmp_path):
    """A compact record of the seed's batch at decode step k costs what estimate says for step k."""
    recs = [{"ts": k, "replica": 0, "batch": 128, "prefix": 4096, "siblings": 64, "private": k} for k in (1, 512, 1024)]
    log = write_jsonl(tmp_path / "compact.jsonl", recs)
    doc = analyze_json(log, "--workload", root / "workloads/rl-rollouts-64.yaml")
    est = json.loads(run("estimate", root / "workloads/rl-rollouts-64.yaml", "--json").stdout)
    want = sum(est[f"{s}_step"]["per_sequence"]["step_s"] for s in ("first", "middle", "final"))
    want_c = sum(est[f"{s}_step"]["cascade"]["step_s"] for s in ("first", "middle", "final"))
    assert doc["decode_time"]["overall"]["per_sequence_s"] == pytest.approx(want, rel=1e-9)
    assert doc["decode_time"]["overall"]["cascade_s"] == pytest.approx(want_c, rel=1e-9)
    assert doc["distributions"]["overall"]["groups"]["p50"] == 2


def flat_copies(tmp_path, src):
    """The same per-sequence log as flat CSV/Parquet (one row per step and sequence), zstd JSONL."""
    con = duckdb.connect()
    rows = (f"SELECT ts, replica, q.request AS request, q.\"group\" AS \"group\", q.shared AS shared, "
            f"q.private AS private, "
            f"array_to_string(q.levels, '/') AS levels FROM (SELECT ts, replica, unnest(seqs) AS q FROM "
            f"read_json('{src}', format='newline_delimited', columns={{ts: 'DOUBLE', replica: 'VARCHAR', "
            f"seqs: 'STRUCT(request VARCHAR, \"group\" VARCHAR, shared BIGINT, private BIGINT, levels BIGINT[])[]'}}))")
    out = {}
    for name, opts in (("log.csv", "FORMAT csv, HEADER"), ("log.csv.gz", "FORMAT csv, HEADER, COMPRESSION gzip"),
                       ("log.parquet", "FORMAT parquet")):
        con.execute(f"COPY ({rows}) TO '{tmp_path / name}' ({opts})")
        out[name] = tmp_path / name
    con.execute(f"COPY (SELECT * FROM read_json('{src}', format='newline_delimited')) "
                f"TO '{tmp_path / 'log.jsonl.zst'}' "
                "(FORMAT json, COMPRESSION zstd)")
    out["log.jsonl.zst"] = tmp_path / "log.jsonl.zst"
    gz = tmp_path / "log.jsonl.gz"
    gz.write_bytes(gzip.compress(src.read_bytes()))
    out["log.jsonl.gz"] = gz
    return out


SMALL_TREE = """schema_version: 1
model: llama-3-8b
tree:
  tokens: 500
  children:
    - tokens: 3000
      copies: 3
      children:
        - {tokens: 40, copies: 2, samples: 4, output_tokens: 64, private_tokens: 7}
    - {tokens: 100, samples: 5, output_tokens: 48}
"""


def test_every_format_and_compression_agrees(tmp_path):
    wl = tmp_path / "small.yaml"
    wl.write_text(SMALL_TREE)
    src = tmp_path / "sim.jsonl"
    assert run("simulate-log", wl, "--out", src).exit_code == 0
    est = json.loads(run("estimate", wl, "--json").stdout)
    base = analyze_json(src, "--model", "llama-3-8b")
    assert base["decode_time"]["overall"]["speedup"] == pytest.approx(est["run"]["speedup"], rel=1e-9)
    for name, path in flat_copies(tmp_path, src).items():
        doc = analyze_json(path, "--model", "llama-3-8b")
        assert doc["steps"] == base["steps"] and doc["malformed"] == 0, name
        assert \
            doc["decode_time"]["overall"]["speedup"] == pytest.approx(base["decode_time"]["overall"]["speedup"]), name
        assert doc["distributions"]["overall"] == base["distributions"]["overall"], name


def test_globs_and_several_replicas(tmp_path):
    for r in range(3):
        write_jsonl(tmp_path / f"day-r{r}.jsonl", [{"ts": k, "replica": f"r{r}", "batch": 16, "prefix": 2048,
                                                    "siblings": 16, "private": 50} for k in range(5)])
    doc = analyze_json(tmp_path / "day-*.jsonl", "--model", "llama-3-8b")
    assert doc["steps"] == 15 and doc["replicas"] == ["r0", "r1", "r2"] and len(doc["files"]) == 3


def test_malformed_records_counted_and_located(tmp_path):
    good = {"ts": 1, "replica": "a", "seqs": [seq("x", "g", 100, 1)]}
    lines = [json.dumps(good), "{not json", json.dumps({**good, "ts": 2, "seqs": [seq("x", "g", -5, 2)]}),
             "", json.dumps({"ts": 3, "replica": "a", "seqs": [{"request": "x", "group": "g", "private": 3}]}),
             json.dumps({**good, "ts": 4})]
    log = tmp_path / "bad.jsonl"
    log.write_text("\n".join(lines) + "\n")
    doc = analyze_json(log, "--model", "llama-3-8b")
    assert doc["malformed"] == 3 and doc["steps"] == 2
    where = [(b["line"], b["reason"].split(":")[0]) for b in doc["malformed_examples"]]
    assert where == [(2, "not valid JSON (JSON is malformed"), (3, "seqs[0].shared"), (5, "seqs[0]")]
    assert "shared" in doc["malformed_examples"][2]["reason"]
    res = run("analyze", log, "--model", "llama-3-8b", "--strict")
    assert res.exit_code == 2
    err = res.stderr.strip()
    assert len(err.splitlines()) == 1 and err.startswith(f"error: {log}:2: not valid JSON")


def test_malformed_csv_row_names_line_and_field(tmp_path):
    log = tmp_path / "bad.csv"
    log.write_text("ts,replica,request,group,shared,private\n1,a,x,g,100,1\n2,a,x,g,lots,2\n3,a,x,g,100,3\n")
    doc = analyze_json(log, "--model", "llama-3-8b")
    assert doc["malformed"] == 1 and doc["steps"] == 2
    res = run("analyze", log, "--model", "llama-3-8b", "--strict")
    assert res.exit_code == 2 and res.stderr.startswith(f"error: {log}:3: shared:")


@pytest.mark.parametrize("args, text", [
    (["nothing-*.jsonl"], "nothing-*.jsonl: no file matches"),
    (["missing.jsonl"], "missing.jsonl: no such log file"),
    (["{tmp}/x.txt"], "unknown log format"),
    (["{tmp}/neither.jsonl"], "neither log form"),
])
def test_bad_input_one_line_exit_2(tmp_path, args, text):
    (tmp_path / "x.txt").write_text("hi\n")
    write_jsonl(tmp_path / "neither.jsonl", [{"ts": 1, "replica": "a", "foo": 1}])
    res = run("analyze", *[a.format(tmp=tmp_path) for a in args], "--model", "llama-3-8b")
    assert res.exit_code == 2, res.output
    assert len(res.stderr.strip().splitlines()) == 1 and text in res.stderr


def test_analyze_needs_a_model(tmp_path):
    res = run("analyze", known_log(tmp_path))
    assert res.exit_code == 2 and "--model" in res.stderr


def test_plots_and_table(tmp_path):
    # uncalibrated: replica a pays (8 siblings over 4,096 tokens); b shares nothing, so it cannot (with the shipped
    # H100 numbers a does not pay at 1-2 generated tokens, and only b's no-sharing "win" used to make the 50%)
    res = run("analyze", known_log(tmp_path), "--model", "llama-3-8b", "--uncalibrated", "--plots", tmp_path / "plots")
    assert res.exit_code == 0, res.output
    assert "Cascade would pay in 50.0% of the steps" in res.stdout
    png = tmp_path / "plots/log-distributions.png"
    assert png.stat().st_size > 10_000 and (tmp_path / "plots/log-distributions.svg").exists()


def test_schema_doc_is_generated_from_the_format(root):
    assert json.loads((root / "docs/log-schema.json").read_text()) == json_schema()
    for name, form in (("docs/log-example.jsonl", "seq"), ("docs/log-example-compact.jsonl", "compact")):
        for line in (root / name).read_text().splitlines():
            assert check_record(json.loads(line), form) is None


@pytest.mark.parametrize("rec, field", [
    ({"ts": 1, "replica": "a", "seqs": [seq("x", "a/b", 10, 1, levels=[4])]}, "seqs[0].levels"),
    ({"ts": 1, "replica": "a", "seqs": [seq("x", "a/b", 10, 1, levels=[6, 4])]}, "seqs[0].levels"),
    ({"ts": 1, "replica": "a", "batch": 4, "prefix": 10, "siblings": 3, "private": 1, "groups": 2}, "groups"),
    ({"ts": "x", "replica": "a", "seqs": []}, "ts"),
])
def test_record_rules_python_and_sql_agree(tmp_path, rec, field):
    form = "seq" if "seqs" in rec else "compact"
    assert check_record(rec, form).startswith(field)
    ok = {"ts": 9, "replica": "a", "seqs": [seq("y", "g", 5, 1)]} if form == "seq" else \
        {"ts": 9, "replica": "a", "batch": 4, "prefix": 10, "siblings": 2, "private": 1}
    doc = analyze_json(write_jsonl(tmp_path / "r.jsonl", [ok, rec]), "--model", "llama-3-8b")
    assert doc["malformed"] == 1 and doc["malformed_examples"][0]["line"] == 2


def test_json_schema_validates_examples_and_simulated_logs(root, tmp_path):
    import jsonschema

    schema = json.loads((root / "docs/log-schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    v = jsonschema.Draft202012Validator(schema)
    log = tmp_path / "sim.jsonl"
    run("simulate-log", root / "workloads/system-prompt-document-samples.yaml", "--out", log)
    lines = log.read_text().splitlines()[:3] + (root / "docs/log-example.jsonl").read_text().splitlines() + \
        (root / "docs/log-example-compact.jsonl").read_text().splitlines()
    for line in lines:
        v.validate(json.loads(line))
    for bad in ({"ts": 1, "replica": "a", "seqs": [seq("x", "g", -1, 1)]}, {"ts": 1, "replica": "a"},
                {"ts": 1, "replica": "a", "batch": 0, "prefix": 1, "siblings": 1, "private": 0}):
        assert not v.is_valid(bad)


def test_compact_csv_and_parquet(tmp_path):
    csv_log = tmp_path / "c.csv"
    csv_log.write_text("ts,replica,batch,prefix,siblings,private\n1,a,64,2048,16,10\n2,a,64,2048,16,x\n3,b,8,0,1,7\n")
    doc = analyze_json(csv_log, "--model", "llama-3-8b", "--ideal")
    assert doc["steps"] == 2 and doc["malformed"] == 1 and doc["malformed_examples"][0]["line"] == 3
    assert doc["distributions"]["per_replica"]["a"]["groups"]["max"] == 4
    pq = tmp_path / "c.parquet"
    duckdb.connect().execute(f"COPY (SELECT * FROM read_csv('{csv_log}') WHERE ts != 2) TO '{pq}' (FORMAT parquet)")
    doc2 = analyze_json(pq, "--model", "llama-3-8b", "--ideal")
    assert doc2["steps"] == 2 and doc2["decode_time"] == doc["decode_time"]


@pytest.mark.parametrize("args, text", [
    (["simulate-log", "{wl}", "--out", "{tmp}/x.csv"], "--out"),
    (["simulate-log", "{tmp}/missing.yaml", "--out", "{tmp}/x.jsonl"], "missing.yaml"),
    (["analyze", "{tmp}/ok.jsonl", "--model", "llama-3-8b", "--engine", "hadoop"], "--engine"),
    (["analyze", "{tmp}/empty.jsonl", "--model", "llama-3-8b"], "no records"),
    (["analyze", "{tmp}/ok.jsonl", "--model", "llama-3-8b", "--workload", "{wl}"], "one of them"),
])
def test_more_bad_input(root, tmp_path, args, text):
    write_jsonl(tmp_path / "ok.jsonl",
                [{"ts": 1, "replica": "a", "batch": 4, "prefix": 10, "siblings": 2, "private": 1}])
    (tmp_path / "empty.jsonl").write_text("")
    res = run(*[a.format(tmp=tmp_path, wl=root / "workloads/rl-rollouts-64.yaml") for a in args])
    assert res.exit_code == 2, res.output
    assert len(res.stderr.strip().splitlines()) == 1 and text in res.stderr
    assert not (tmp_path / "x.jsonl").exists() and not (tmp_path / "x.csv").exists()


@pytest.mark.parametrize("name", ["system-prompt-document-samples", "rl-rollouts-64", "parallel-sampling-n8"])
def test_common_prefix_and_vllm_gate_match_the_workload_view(root, tmp_path, name):
    """Every step of a simulated log holds the whole batch, so vLLM's view of each step is the
    workload's: the prefix shared by all, and the opted-in gate's decision."""
    from cascade_plan.cost.estimate import estimate
    from cascade_plan.engine.engine_gate import common_prefix_of_all, engine_view
    from cascade_plan.inputs.choices import ParamsChoice
    from cascade_plan.inputs.workload import load_scenario
    from cascade_plan.planning.params_select import select_params

    wl = root / f"workloads/{name}.yaml"
    log = tmp_path / "sim.jsonl"
    run("simulate-log", wl, "--out", log)
    doc = analyze_json(log, "--workload", wl, "--ideal")
    scn = load_scenario(wl)
    view = engine_view(estimate(scn, select_params(scn, ParamsChoice(ideal=True))))
    common = doc["distributions"]["overall"]["common_prefix_tokens"]
    assert common["p50"] == common["max"] == common_prefix_of_all(scn.tree)
    assert doc["vllm"]["share_of_steps_vllm_would_cascade"] == (1.0 if view.opted_in.used else 0.0)


def test_vllm_would_cascade_one_common_prefix(tmp_path):
    recs = [{"ts": k, "replica": 0, "batch": 64, "prefix": 4096, "siblings": 64, "private": k} for k in range(1, 4)]
    recs.append({"ts": 9, "replica": 0, "batch": 64, "prefix": 4096, "siblings": 32, "private": 1})   # two prompts
    doc = analyze_json(write_jsonl(tmp_path / "c.jsonl", recs), "--model", "llama-3-8b", "--ideal")
    assert doc["vllm"]["share_of_steps_vllm_would_cascade"] == 0.75
    assert doc["distributions"]["overall"]["common_prefix_tokens"]["max"] == 4096
    assert doc["distributions"]["overall"]["common_prefix_tokens"]["mean"] == 3072


def test_spark_submit_script_runs_analyze_on_the_spark_engine(monkeypatch):
    """The file spark-submit runs passes its arguments to `analyze` with --engine spark."""
    from cascade_plan.cli import spark_submit
    from cascade_plan.logs import pipeline, sources

    seen = {}

    class Stop(Exception):
        pass

    def fake_run_analysis(files, scn, params, engine, **kw):
        seen.update(files=files, model=scn.model.id, engine=engine)
        raise Stop

    monkeypatch.setattr(sources, "expand", lambda logs: list(logs))
    monkeypatch.setattr(pipeline, "run_analysis", fake_run_analysis)
    with pytest.raises(Stop):
        spark_submit.main(["hdfs:///logs/*.jsonl.gz", "--model", "llama-3-8b", "--hardware", "h200", "--json"])
    assert seen == {"files": ["hdfs:///logs/*.jsonl.gz"], "model": "llama-3-8b", "engine": "spark"}
