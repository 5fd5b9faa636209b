"""Output that survives pipes and CI logs: whole tables when stdout is not a terminal, --json on every table."""

import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from cascade_plan.cli.app import COMMANDS, app

# Commands that write files, drive the GPU or print a document rather than a table.
NO_TABLE = {"plot", "report", "probe", "schema", "simulate-log"}


def _piped(*args) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    res = subprocess.run([sys.executable, "-m", "cascade_plan", *args], capture_output=True, text=True, env=env,
                         timeout=60)
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_piped_tables_are_whole_not_cut_to_80_columns():
    out = _piped("compare", "rl-rollouts-64", "--hardware", "a100-80gb,h100-sxm,h200,mi300x", "--kv-dtype", "bf16,fp8")
    assert "…" not in out
    assert "probe/flashinfer" in out and "a100-80gb" in out and "mi300x" in out
    assert max(len(line) for line in out.splitlines()) > 80
    est = _piped("estimate", "rl-rollouts-64")
    assert "…" not in est and "middle (k=512)" in est
    route = _piped("route", "--model", "llama-3-8b", "--replicas", "8", "--samples", "16", "--prefix", "4096")
    assert "…" not in route and max(len(line) for line in route.splitlines()) > 80


@pytest.mark.parametrize("name", [n for n, _ in COMMANDS if n not in NO_TABLE])
def test_every_table_command_has_json(name):
    res = CliRunner().invoke(app, [name, "--help"], env={"COLUMNS": "200"})
    assert res.exit_code == 0 and "--json" in res.stdout
