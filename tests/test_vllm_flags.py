"""vLLM's flag spellings: -tp / --tensor-parallel-size, --kv-cache-dtype fp8|fp8_e4m3|auto and
--gpu-memory-utilization work on every command that takes the planner's own option, with the same answer."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from cascade_plan.cli.app import app

runner = CliRunner()
QUICK = ["--model", "llama-3-70b", "--hardware", "h200", "--prefix", "4096", "--samples", "16", "--output-tokens",
         "256"]


def _json(args: list[str]) -> dict:
    r = runner.invoke(app, ["estimate", *QUICK, "--json", *args])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def _same(a: dict, b: dict) -> bool:
    strip = lambda d: {k: v for k, v in d.items() if k not in ("created_utc", "tool_version")}
    return strip(a) == strip(b)


@pytest.mark.parametrize("spelling", [["-tp", "4"], ["--tensor-parallel-size", "4"], ["--tensor-parallel-size=4"]])
def test_tensor_parallel_spellings(spelling):
    doc = _json(spelling)
    assert doc["tp"] == 4 and _same(doc, _json(["--tp", "4"]))


@pytest.mark.parametrize(("spelling", "dtype"), [("fp8", "fp8"), ("fp8_e4m3", "fp8"), ("FP8_E5M2", "fp8"),
                                                 ("auto", "bf16"), ("int8", "int8")])
def test_kv_cache_dtype_spellings(spelling, dtype):
    doc = _json(["-tp", "4", "--kv-cache-dtype", spelling])
    assert doc["kv_dtype"] == dtype and _same(doc, _json(["-tp", "4", "--kv-dtype", dtype]))


def test_gpu_memory_utilization_is_one_minus_the_reserve():
    doc = _json(["-tp", "4", "--gpu-memory-utilization", "0.85"])
    assert _same(doc, _json(["-tp", "4", "--reserve", "0.15"]))
    assert doc["memory"] != _json(["-tp", "4"])["memory"]                  # it did change the budget


def test_reserve_and_utilization_together_is_one_clear_error():
    r = runner.invoke(app, ["estimate", *QUICK, "--reserve", "0.2", "--gpu-memory-utilization", "0.9"])
    assert r.exit_code == 2 and "give --reserve or --gpu-memory-utilization, not both" in r.output
    assert "Traceback" not in r.output


def test_compare_takes_vllm_dtype_spellings():
    r = runner.invoke(app, ["compare", "rl-rollouts-64", "--kv-cache-dtype", "auto,fp8_e4m3", "-tp", "1",
                            "--gpu-memory-utilization", "0.9", "--uncalibrated", "--json"])
    assert r.exit_code == 0, r.output
    assert [row["kv_dtype"] for row in json.loads(r.stdout)["rows"]] == ["bf16", "fp8"]


def _options() -> dict[str, set[str]]:
    group = typer.main.get_command(app)
    return {name: {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)}
            for name, cmd in group.commands.items()}


def test_every_command_with_our_option_takes_vllm_spelling():
    checked = 0
    for name, opts in _options().items():
        for ours, theirs in (("--tp", {"-tp", "--tensor-parallel-size"}), ("--kv-dtype", {"--kv-cache-dtype"}),
                             ("--reserve", {"--gpu-memory-utilization"})):
            if ours in opts:
                checked += 1
                assert theirs <= opts, f"{name}: {ours} without {theirs - opts}"
    assert checked >= 15           # estimate, breakeven, compare, check, plot, report, models, route, rl, analyze...
