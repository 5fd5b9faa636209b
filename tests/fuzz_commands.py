"""Generated command lines for the commands the first fuzz (tests/fuzz_support.py) did not reach: route, rl,
simulate-log, analyze (with generated and corrupted logs), import-aic, workloads, schema and probe's
arguments (CPU side). tests/test_fuzz.py runs a bounded profile; benchmarks/fuzz_campaign.py
(--commands N) a long one.

Each command line runs through the CLI (typer's CliRunner) and is classified by `run_command`:
"answered" (exit 0; with --json, strict JSON whose numbers are finite and non-negative where they
must be), "refused" (exit 2, one line on stderr) or a defect: "traceback", "wrong exit", "multi-line
error", "non-finite", "negative", "invalid json", "half-written" (a refused run left a file behind).
"""

from __future__ import annotations

import json
import math
import re
import time
import tracemalloc
from pathlib import Path

from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parent.parent

# Odd text for any option: junk, non-finite, negative, huge, empty.
ODD = ["nan", "inf", "-inf", "1e999", "-1", "0", "1e300", "-1e-300", "", "abc", "1_0", "0x10", "9" * 30,
       str(2**63), str(2**64), "1e20", "٣"]
# Numbers a JSON output may legitimately hold below zero (cascade can lose time).
# DuckDB errors raised by a record's values (not by a corrupt file): a malformed record must be
# counted and listed, never abort the whole scan.
ENGINE_ERROR = re.compile(r"Division by zero|Out of Range Error|Conversion Error|Binder Error|INTERNAL Error")
SIGNED = re.compile(r"saved|saving|delta|gain|change|ts$|seed")


def _value(valid: list[str]):
    """A valid value (three times in four) or an odd one."""
    odd = st.one_of(st.sampled_from(ODD), st.integers(-10, 10**13).map(str),
                    st.floats(allow_nan=True, allow_infinity=True).map(repr))
    return st.integers(0, 3).flatmap(lambda i: odd if i == 0 else st.sampled_from(valid))


def _options(table: dict[str, list[str]], max_size: int = 4):
    """Up to `max_size` options of `table`, each with a valid or odd value."""
    return st.lists(st.sampled_from(sorted(table)), max_size=max_size, unique=True).flatmap(
        lambda names: st.tuples(*[st.tuples(st.just(n), _value(table[n])) for n in names])).map(
        lambda pairs: [x for pair in pairs for x in pair])


SCENARIO = st.sampled_from([["--model", "llama-3-8b"], ["--model", "llama-3-8b", "--hardware", "b200"],
                            ["--model", "llama-3-8b"], ["--model", "llama-3-8b", "--hardware", "h200"],
                            ["--model", "qwen2.5-7b", "--uncalibrated"], ["--model", "mixtral-8x7b", "--ideal"],
                            ["--workload", str(ROOT / "workloads" / "rl-rollouts-64.yaml")], [],
                            ["--model", "nonexistent-model"], ["--model", "llama-3-8b", "--tp", "3"]])

ROUTE = {"--replicas": ["1", "8", "64", "4096", "4097"], "--samples": ["1", "16", "1000", "1000000"],
         "--prefix": ["0", "4096", "10000000"], "--output-tokens": ["1", "1024", "10000000"],
         "--private-tokens": ["0", "100"], "--output-cv": ["0", "0.5", "1000"], "--batch": ["1", "64", "1000000"],
         "--rate": ["0", "10", "1e6", "1e15"], "--sibling-spread": ["0", "0.5", "1000"],
         "--requests": ["1", "7", "1000", "20000"], "--seed": ["0", "1", str(2**63 - 1)]}
RL = {"--prompts": ["1", "8", "64"], "--samples": ["1", "16", "256"], "--prompt-tokens": ["0", "2048", "1e7"],
      "--prompt-cv": ["0", "0.3", "1000"], "--completion-tokens": ["1", "1024", "1e7"],
      "--completion-cv": ["0", "0.6", "1000"], "--max-completion": ["1", "8192", "10000000"],
      "--replicas": ["1", "8", "4096"], "--other-s": ["0", "30", "1e12"], "--sampled-steps": ["1", "2", "1000"],
      "--seed": ["0", "7"]}
PROBE = {"--page-size": ["1", "16", "4096", "4097"], "--time-budget": ["1", "60", "1e12"],
         "--backend": ["triton", "torch", "flashinfer", "flashinfer-fa2", "bogus"]}
ANALYZE = {"--memory-limit": ["1GB", "500MB", "2GiB", "1.5 GB", "garbage", "0"],
           "--threads": ["1", "2", "1024", "1025"],
           "--show-bad": ["0", "1", "10", "1000000"], "--engine": ["duckdb", "spark", "nope"]}


def route_args():
    return st.tuples(SCENARIO, _options(ROUTE), st.sampled_from([[], ["--forks-together"]])).map(
        lambda t: ["route", "--requests", "2000", *t[0], *t[1], *t[2], "--json"])    # the last --requests wins


def rl_args():
    return st.tuples(SCENARIO, _options(RL)).map(lambda t: ["rl", "--sampled-steps", "1", *t[0], *t[1], "--json"])


def probe_args():
    out = st.sampled_from(["cal.json", "/etc/passwd/x.json", ".", "sub/dir/cal.json", ""])
    return st.tuples(out, _options(PROBE, 2), st.sampled_from([[], ["--quick"], ["--step"]])).map(
        lambda t: ["probe", "--out", t[0], *t[1], *t[2]])


def small_commands():
    """workloads, schema, import-aic: arguments only (import-aic without AIConfigurator's data)."""
    name = st.one_of(st.sampled_from(["rl-rollouts-64", "RL-ROLLOUTS-64.yaml", "", ".", "/etc/passwd", "nope",
                                      "../workloads/beam-search.yaml"]), st.text(max_size=6))
    gpu = st.one_of(st.sampled_from(["h100-sxm", "all", "nope", "", "h200"]), st.text(max_size=5))
    return st.one_of(
        st.just(["workloads", "--json"]), name.map(lambda n: ["workloads", "--path", n]), st.just(["schema"]),
        st.tuples(gpu, st.sampled_from(["x.json", "/etc/passwd/x.json", "out", ""]),
                  st.sampled_from(["vllm", "sglang", "bogus"]), st.sampled_from([[], ["--aic-data", "."],
                                                                                 ["--aic-data", "/etc/passwd"]])).map(
            lambda t: ["import-aic", t[0], "--out", t[1], "--framework", t[2], *t[3], "--json"]))


# ---- logs ------------------------------------------------------------------------------------------

_num = st.one_of(st.integers(0, 5000), st.integers(0, 5000), st.sampled_from([0, 1, -1, 2**31, 2**63 - 1, 10**8,
                                                                              10**9, 10**8 + 1, 10**9 + 1]),
                 st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=3), st.none())


def compact_records():
    return st.fixed_dictionaries(
        {"ts": st.one_of(st.floats(0, 1e6), st.sampled_from([1e999, -1e999, 1e16])),
         "replica": st.sampled_from(["a", "b", 0]),
         "batch": _num, "prefix": _num, "siblings": _num, "private": _num}, optional={"groups": _num, "step": _num})


def seq_records():
    seq = st.fixed_dictionaries({"request": st.text(max_size=3), "group": st.sampled_from(["g", "a/b", "", "x/y/z"]),
                                 "shared": _num, "private": _num},
                                optional={"levels": st.lists(_num, max_size=3)})
    return st.fixed_dictionaries({"ts": st.floats(0, 1e3), "replica": st.sampled_from(["a", "b"]),
                                  "seqs": st.lists(seq, max_size=4)}, optional={"step": _num})


LOG_MUTATIONS = [
    lambda b: b, lambda b: b, lambda b: b,
    lambda b: b[: len(b) // 2],                         # truncated mid-record
    lambda b: b.replace(b"\n", b"\n\x00", 1),           # a NUL byte
    lambda b: b"\x1f\x8b" + b,                          # a gzip magic on plain text
    lambda b: b + b"{not json\n",
    lambda b: b"",                                      # empty
]


def log_files():
    """(file name, bytes) of a generated and maybe corrupted log."""
    records = st.lists(st.one_of(compact_records(), seq_records()), min_size=1, max_size=6)
    name = st.sampled_from(["l.jsonl", "l.jsonl", "l.ndjson", "l.jsonl.gz", "l.jsonl.zst", "l.parquet", "l.csv"])
    return st.tuples(name, records, st.sampled_from(range(len(LOG_MUTATIONS)))).map(
        lambda t: (t[0], LOG_MUTATIONS[t[2]]("".join(json.dumps(r) + "\n" for r in t[1]).encode())))


def analyze_args():
    outs = st.sampled_from([[], ["--workload-out", "summary.yaml"], ["--workload-out", "/etc/passwd/x.yaml"],
                            ["--workload-out", "."], ["--plots", "/etc/passwd"]])
    return st.tuples(log_files(), SCENARIO, _options(ANALYZE, 2), outs, st.sampled_from([[], ["--strict"]])).map(
        lambda t: (["analyze", t[0][0], *t[1], *t[2], *t[3], *t[4], "--json"], {t[0][0]: t[0][1]}))


def simulate_args(workload_docs):
    """simulate-log of a generated workload (tests/fuzz_support.workloads), with odd options."""
    out = st.sampled_from(["sim.jsonl", "sim.jsonl.gz", "sim.txt", "/etc/passwd/x.jsonl", "nested/d/sim.jsonl"])
    step = st.one_of(st.sampled_from(["0.01", "0", "1e6"]), st.sampled_from(ODD))
    return st.tuples(workload_docs, out, step, st.sampled_from(["r0", "", "7"])).map(
        lambda t: (["simulate-log", "w.yaml", "--out", t[1], "--step-s", t[2], "--replica", t[3]], {"w.yaml": t[0]}))


def commands(workload_docs):
    """Any of the above: (argv, files to create in the working folder)."""
    return st.one_of(route_args().map(lambda a: (a, {})), rl_args().map(lambda a: (a, {})),
                     probe_args().map(lambda a: (a, {})), small_commands().map(lambda a: (a, {})),
                     analyze_args(), simulate_args(workload_docs))


# ---- classification ---------------------------------------------------------------------------------

def _numbers(doc, key=""):
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _numbers(v, str(k))
    elif isinstance(doc, list):
        for v in doc:
            yield from _numbers(v, key)
    elif isinstance(doc, (int, float)) and not isinstance(doc, bool):
        yield key, doc


def classify(res, argv: list[str], before: set, after: set) -> str:
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        return f"traceback: {argv[0]}: {type(res.exception).__name__}: {str(res.exception)[:100]}"
    if res.exit_code == 2:
        lines = res.stderr.strip().splitlines()
        if len(lines) != 1 or not lines[0].startswith("error: "):
            return f"multi-line error: {argv[0]}"
        if after - before:
            return f"half-written: {argv[0]}: {sorted(after - before)[:2]}"
        if ENGINE_ERROR.search(lines[0]):          # the scan failed on a value: one bad record sank the log
            return f"engine error: {argv[0]}: {lines[0][:120]}"
        return "refused"
    if res.exit_code != 0:
        return f"wrong exit {res.exit_code}: {argv[0]}"
    if "--json" in argv:
        try:
            doc = json.loads(res.stdout, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
        except ValueError:
            return f"invalid json: {argv[0]}"
        for key, value in _numbers(doc):
            if not math.isfinite(value):
                return f"non-finite: {argv[0]}: {key}"
            if value < 0 and not SIGNED.search(key):
                return f"negative: {argv[0]}: {key}"
    return "answered"


def _tree(folder: Path) -> set:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def run_command(argv: list[str], files: dict, folder: Path) -> tuple[str, int, float]:
    """Run one command line in `folder` (files created first): (outcome, peak traced bytes, seconds)."""
    import os

    from typer.testing import CliRunner

    from cascade_plan.cli.app import app

    for name, content in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8", "surrogatepass"))
    before = _tree(folder)
    cwd = os.getcwd()
    os.chdir(folder)
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        res = CliRunner().invoke(app, argv)
    finally:
        wall = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        os.chdir(cwd)
    return classify(res, argv, before, _tree(folder)), peak, wall


DEFECTS = ("traceback", "wrong exit", "multi-line", "non-finite", "negative", "invalid json", "half-written",
           "engine error")


def is_defect(outcome: str) -> bool:
    return outcome.startswith(DEFECTS)
