"""The robustness contract for the commands the first fuzz did not reach (route, rl, simulate-log, analyze,
import-aic, workloads, probe's arguments): one reproducer per failure class tests/fuzz_commands.py found."""

import json
import tracemalloc

import pytest
from test_robustness import GOOD, refused, run, workload

from cascade_plan.inputs import limits

M = ["--model", "llama-3-8b", "--hardware", "h200"]


# ---- bounded time and memory ---------------------------------------------------------------------

@pytest.mark.parametrize("args, option", [
    (["route", "--requests", "1000000000000"], "--requests"),          # asked for 466 GiB
    (["route", "--samples", "1000000000000", "--requests", "100"], "--samples"),
    (["route", "--batch", "100000000000"], "--batch"),                 # was reported as --groups
    (["rl", "--prompts", "1000000000"], "--prompts"),                  # ran past 30 s at 5.6 GB
    (["rl", "--samples", "1000000000", "--prompts", "1"], "--samples"),
    (["rl", "--sampled-steps", "1000000000"], "--sampled-steps"),
    (["rl", "--replicas", "100000000000"], "--replicas"),
])
def test_counts_beyond_the_bounds_are_one_line(args, option):
    refused(run(*args, *M), option)


def test_rl_work_is_bounded_across_options():
    refused(run("rl", *M, "--prompts", "4096", "--samples", "256", "--sampled-steps", "2"),
            "--sampled-steps x --prompts")
    refused(run("rl", *M, "--prompts", "4096", "--samples", "1", "--replicas", "4096", "--sampled-steps", "2"),
            "--sampled-steps x --replicas")


def test_route_with_more_siblings_than_requests_allocates_per_request():
    tracemalloc.start()
    try:
        res = run("route", *M, "--samples", str(limits.MAX_SAMPLES), "--requests", "100", "--json")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert res.exit_code == 0, res.output
    assert peak < 100 * 2**20


def test_route_co_residency_is_exact_with_wide_spreads():
    # float keys (segment x width + time) lost the order of close times: a request missed itself,
    # 1/0 siblings made infinite groups and round() raised OverflowError
    res = run("route", *M, "--output-cv", "1000", "--sibling-spread", "1000", "--requests", "200000", "--json")
    assert res.exit_code == 0, res.output
    for p in json.loads(res.stdout)["policies"]:
        assert p["siblings_mean"] >= 1 and 0 < p["speedup"] < 100


def test_simulate_log_of_a_terabyte_log_is_refused_before_writing(tmp_path):
    p = workload(tmp_path, "{tokens: 100, copies: 1000, samples: 1000, output_tokens: 10000000}", "hardware: h200\n")
    refused(run("simulate-log", p, "--out", tmp_path / "big.jsonl"), "w.yaml", "sequences")
    p = workload(tmp_path, "{tokens: 100, copies: 10, samples: 1000, output_tokens: 10000000}", "hardware: h200\n")
    refused(run("simulate-log", p, "--out", tmp_path / "big.jsonl"), "sequence-steps")
    assert [f.name for f in tmp_path.iterdir()] == ["w.yaml"]


# ---- non-finite and out-of-range numbers ----------------------------------------------------------

@pytest.mark.parametrize("args, option", [
    (["rl", "--prompt-tokens", "nan"], "--prompt-tokens"),           # printed a confident table from garbage
    (["rl", "--prompt-tokens", "1e300"], "--prompt-tokens"),
    (["rl", "--completion-cv", "1e300"], "--completion-cv"),         # OverflowError
    (["rl", "--other-s", "inf"], "--other-s"),
    (["route", "--output-cv", "1e300"], "--output-cv"),              # OverflowError
    (["route", "--sibling-spread", "1e308"], "--sibling-spread"),    # overflow warnings, wrong counts
    (["route", "--rate", "nan"], "--rate"),
    (["route", "--seed", "-1"], "--seed"),                           # ValueError from numpy
    (["rl", "--seed", "-5"], "--seed"),
])
def test_non_finite_or_out_of_range_options_are_one_line(args, option):
    refused(run(*args, *M), option)


@pytest.mark.parametrize("step", ["inf", "nan", "1e308"])
def test_simulate_log_step_must_be_finite(tmp_path, step):
    refused(run("simulate-log", GOOD, "--out", tmp_path / "s.jsonl", "--step-s", step), "--step-s")
    assert not list(tmp_path.iterdir())


# ---- logs: corrupt files, huge counts, values that broke the scan -----------------------------------

@pytest.mark.parametrize("name, data", [("l.jsonl.gz", b"\x00\x01garbage"), ("l.jsonl.zst", b"\x00\x01garbage"),
                                        ("l.parquet", b"\x00\x01garbage")])
def test_corrupt_compressed_or_parquet_logs_are_one_line(tmp_path, name, data):
    (tmp_path / name).write_bytes(data)
    refused(run("analyze", tmp_path / name, *M), name, "cannot read this log")


def _analyze(tmp_path, records):
    log = tmp_path / "l.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in records))
    res = run("analyze", log, *M, "--json")
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


OK = {"ts": 9, "replica": "r", "batch": 8, "prefix": 100, "siblings": 4, "private": 1}


@pytest.mark.parametrize("bad", [
    {"siblings": 0},                                               # batch // 0 aborted the whole scan
    {"batch": 10**9, "prefix": 9 * 10**12, "siblings": 1},         # INT64 overflow aborted the whole scan
    {"ts": 1e999},
    {"private": 1e300},
])
def test_a_record_with_absurd_values_is_malformed_not_fatal(tmp_path, bad):
    doc = _analyze(tmp_path, [{**OK, "ts": 1, **bad}, OK])
    assert doc["malformed"] == 1 and doc["malformed_examples"][0]["line"] == 1


def test_analyze_checks_every_output_before_scanning(tmp_path):
    log = tmp_path / "s.jsonl"
    assert run("simulate-log", GOOD, "--out", log).exit_code == 0
    refused(run("analyze", log, *M, "--workload-out", tmp_path / "ok.yaml", "--plots", log), "--plots")
    assert not (tmp_path / "ok.yaml").exists()


@pytest.mark.parametrize("args, fragment", [
    (["--memory-limit", "garbage"], "--memory-limit"),    # DuckDB ParserException
    (["--threads", "100000000000"], "--threads"),         # std::bad_alloc abort (exit 134)
    (["--engine", "spark"], "PySpark"),                   # ModuleNotFoundError (where PySpark is missing)
])
def test_analyze_options_are_one_line(tmp_path, args, fragment):
    pytest.importorskip("duckdb")
    if fragment == "PySpark":
        try:
            import pyspark  # noqa: F401
            pytest.skip("PySpark is installed here")
        except ImportError:
            pass
    log = tmp_path / "s.jsonl"
    assert run("simulate-log", GOOD, "--out", log).exit_code == 0
    refused(run("analyze", log, *M, *args), fragment)


# ---- outputs checked first --------------------------------------------------------------------------

@pytest.mark.parametrize("args, option", [
    (["probe", "--out", "/etc/passwd/x.json"], "--out"),
    (["probe", "--out", "{tmp}", "--quick"], "--out"),
    (["probe", "--out", "{tmp}/c.json", "--backend", "bogus"], "--backend"),
    (["probe", "--out", "{tmp}/c.json", "--page-size", "1000000000000"], "--page-size"),
    (["probe", "--out", "{tmp}/c.json", "--time-budget", "inf"], "--time-budget"),
    (["import-aic", "h100-sxm", "--out", "/etc/passwd/x.json"], "--out"),
    (["simulate-log", str(GOOD), "--out", "/etc/passwd/x.jsonl"], "--out"),
    (["route", "--model", "llama-3-8b", "--requests", "100", "--plot", "/etc/passwd"], "--plot"),
    (["workloads", "--path", ""], "--path"),
    (["workloads", "--path", "{tmp}"], "--path"),
])
def test_arguments_and_output_paths_are_checked_before_any_work(tmp_path, args, option):
    refused(run(*[a.replace("{tmp}", str(tmp_path)) for a in args]), option)
    assert not list(tmp_path.iterdir())


def test_probe_backends_are_the_probe_packages():
    # the CLI has no list of its own: it refuses a backend by kernels_probe.attention.grid.BACKENDS
    from kernels_probe.attention.grid import BACKENDS
    from kernels_probe.options import check_choices

    assert check_choices(["nope"], "full") == f"--backend: unknown backend 'nope': use {', '.join(BACKENDS)}"
    assert check_choices(list(BACKENDS), "full") is None


@pytest.mark.xdist_group("spark")      # the worker that runs the other Spark tests: one JVM for all
@pytest.mark.usefixtures("local_spark")
def test_a_log_spark_cannot_read_is_one_line(tmp_path):
    pytest.importorskip("pyspark")
    import shutil

    if not shutil.which("java") and not __import__("os").environ.get("JAVA_HOME"):
        pytest.skip("no Java runtime")
    (tmp_path / "l.parquet").write_bytes(b"\x00\x01garbage")      # AnalysisException / Py4JJavaError tracebacks
    refused(run("analyze", tmp_path / "l.parquet", *M, "--engine", "spark"), "l.parquet",
            "cannot read this log (Spark)")


def test_a_count_whose_product_overflows_int64_is_a_malformed_record(tmp_path):
    # groups x siblings overflowed inside the malformed-record check itself (found by the random fuzz)
    doc = _analyze(tmp_path, [{**OK, "ts": 1, "siblings": 21474836470, "groups": 64940118232339768}, OK])
    assert doc["malformed"] == 1 and doc["malformed_examples"][0]["line"] == 1


def test_a_line_break_in_a_typed_name_stays_on_the_error_line():
    line = refused(run("workloads", "--path", "a\nb\x06"), "is not a shipped workload")
    assert "a\\nb\\x06" in line
