"""At 80 columns no id, number or verdict is cut ('…'): notes and help text wrap instead. For compare,
workloads, route and every command's --help."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from cascade_plan.cli.app import COMMANDS, app

runner = CliRunner()
NARROW = {"COLUMNS": "80"}


def _run(*args: str, env=NARROW) -> str:
    r = runner.invoke(app, list(args), env=env)
    assert r.exit_code == 0, r.output
    return r.stdout


def _fits(out: str) -> None:
    assert "…" not in out
    assert max(len(line) for line in out.splitlines()) <= 80


def test_compare_keeps_every_key_column_whole():
    args = ("compare", "rl-rollouts-64", "--hardware", "a100-80gb,h100-sxm,h200,b200,mi300x", "--kv-dtype", "bf16,fp8")
    out = _run(*args)
    _fits(out)
    rows = json.loads(_run(*args, "--json"))["rows"]
    for r in rows:
        line = next(ln for ln in out.splitlines() if ln.startswith(f"{r['hardware']} ") and f" {r['kv_dtype']} " in ln)
        assert r["verdict"] in line and f"{r['max_sequences_fit']:,}" in line
        assert f"{r['final_per_sequence_step_s'] * 1e3:.1f}" in line
    assert "probe/" in out and "aic/" in out and "flashinfer" in out


def test_compare_needs_no_break_when_it_fits():
    out = _run("compare", "rl-rollouts-64", "--hardware", "a100-80gb,h100-sxm,h200,b200,mi300x")
    _fits(out)
    assert "probe/flashinfer" in out and "aic/flashinfer" in out      # whole ids on one line


def test_workloads_keep_names_and_move_descriptions_below():
    out = _run("workloads")
    _fits(out)
    for r in json.loads(_run("workloads", "--json"))["workloads"]:
        row = next(ln for ln in out.splitlines() if ln.startswith(r["name"] + " "))
        assert r["model"] in row and r["hardware"] in row
        assert f"{r['name']}:" in out                                    # its description, below the table
        for check in r["checks"]:
            assert check in out
    wide = _run("workloads", env={"COLUMNS": "160"})
    assert "what it represents" in wide and "what it represents" not in out


def test_route_keeps_policies_and_numbers_whole():
    out = _run("route", "--model", "llama-3-8b", "--replicas", "8", "--samples", "16", "--prefix", "4096",
               "--requests", "20000")
    _fits(out)
    for policy in ("random", "round-robin", "least-loaded", "prefix-aware"):
        assert any(ln.startswith(policy + " ") for ln in out.splitlines())


@pytest.mark.parametrize("name", [n for n, _ in COMMANDS])
def test_help_never_cuts_an_option(name):
    out = _run(name, "--help")
    assert "…" not in out
    if name == "check":
        for opt in ("--min-sequences-fit", "--vllm-uses-cascade / --no-vllm-uses-cascade", "--gpu-memory-utilization",
                    "--attention-backend", "--markdown"):
            assert opt in out


def test_counts_print_as_integers(tmp_path):
    # system-prompt-document-samples: 1 x 2,000, 8 x 12,000 and 32 x 60 shared tokens (numpy floats inside)
    out = _run("estimate", "system-prompt-document-samples", env={"COLUMNS": "200"})
    assert "8 x 12,000 tokens" in out and "32 x 60 tokens" in out and "1 x 2,000 tokens" in out
    assert ".0 x" not in out and "12,000.0" not in out
    r = runner.invoke(app, ["report", "system-prompt-document-samples", "--no-plots", "--out", str(tmp_path / "r"),
                            "--compare-hardware", ""])
    assert r.exit_code == 0, r.output
    md = (tmp_path / "r" / "report.md").read_text()
    assert "A 12,000-token shared node (level 1, 8 in the batch)" in md and "12,000.0" not in md
