"""Breakeven sweeps against hand arithmetic, axis parsing, and the breakeven command."""

import json

import msgspec
import numpy as np
import pytest
from typer.testing import CliRunner

from cascade_plan import DEFAULT, IDEAL, InputError, Scenario, load_hardware, parse_axis, simple_tree
from cascade_plan.cli.app import app
from cascade_plan.cost.breakeven import breakeven_group_size, breakeven_prefix_tokens, sweep
from cascade_plan.cost.cost_params import KernelParams
from cascade_plan.inputs.model_spec import load_preset

SCN = Scenario(name="t", model=load_preset("llama-3-8b"), hardware=load_hardware("h100-sxm"), kv_dtype="bf16",
               weight_dtype="bf16", tp=1, prefix_caching=True, block_size=16, tree=simple_tree(1, 1, 1, 1))


def test_zero_overhead_cascade_wins_for_every_prefix_and_group_above_one():
    sp = sweep(SCN, IDEAL, [1, 16, 256, 4096, 65536], [2, 3, 16, 512], [0, 1, 4096]).speedup
    assert np.all(sp > 1)
    assert np.all(breakeven_prefix_tokens(SCN, IDEAL, [2, 8, 64], [0, 512]) == 1)
    assert np.all(breakeven_group_size(SCN, IDEAL, [1, 100, 10000], [0, 512]) == 2)
    # a group of one shares nothing: never a win
    assert np.all(breakeven_prefix_tokens(SCN, IDEAL, [1], [0, 512]) == -1)


def test_fixed_prefix_overhead_breakeven_by_hand():
    """Only a prefix-pass launch cost o per layer: cascade wins once (n-1) P c / BW > L o, i.e.
    P > 32 x 5 us x 3.35e12 B/s / ((n-1) x 131,072 B) = 4,089.4 / (n-1) tokens (memory-bound while n < 74)."""
    params = msgspec.structs.replace(IDEAL, prefix=KernelParams(overhead_s=5e-6))
    got = breakeven_prefix_tokens(SCN, params, [2, 5, 9, 33], [0, 700])
    limit = 32 * 5e-6 * 3.35e12 / 131072
    expected = [int(np.floor(limit / (n - 1))) + 1 for n in (2, 5, 9, 33)]
    assert expected == [4090, 1023, 512, 128]
    assert got[:, 0].tolist() == expected
    assert got[:, 1].tolist() == expected        # the suffix pass is the same in both modes here


def test_with_overheads_the_breakeven_prefix_falls_as_the_group_grows():
    be = breakeven_prefix_tokens(SCN, DEFAULT, [2, 4, 8, 16, 64, 256], [1, 512, 4096])
    assert np.all(be > 0)
    assert np.all(np.diff(be, axis=0) <= 0)
    ge = breakeven_group_size(SCN, DEFAULT, [256, 1024, 4096, 32768], [512])
    assert np.all(np.diff(ge[:, 0]) <= 0) and ge[-1, 0] == 2


def test_sweep_matches_the_workload_estimate_at_one_step():
    """A one-level sweep point equals the tree model's step with the same load."""
    from cascade_plan.cost.estimate import estimate

    scn = msgspec.structs.replace(SCN, tree=simple_tree(4096, 2, 64, 1024))
    est = estimate(scn, DEFAULT)
    sw = sweep(scn, DEFAULT, [4096], [64], [1024], n_groups=2)
    assert sw.cascade_step_s[0, 0, 0] == pytest.approx(est.final_step.cascade.step_s)
    assert sw.per_sequence_step_s[0, 0, 0] == pytest.approx(est.final_step.per_sequence.step_s)


@pytest.mark.parametrize(("spec", "expected"), [
    ("256:4096:log", [256, 512, 1024, 2048, 4096]),
    ("100:1000:log", [100, 128, 256, 512, 1000]),
    ("1:1000:log:4", [1, 10, 100, 1000]),
    ("0:100:lin:5", [0, 25, 50, 75, 100]),
    ("0:10:5", [0, 5, 10]),
    ("512,4096", [512, 4096]),
    ("7", [7]),
])
def test_axis_forms(spec, expected):
    assert parse_axis(spec, "--prefix").tolist() == expected


@pytest.mark.parametrize("spec", ["10:1:log", "0:10:log", "a:b:log", "1:2:3:4:5", "-5", "1:10:cubic:3"])
def test_bad_axes(spec):
    with pytest.raises(InputError):
        parse_axis(spec, "--prefix")


def test_breakeven_command_outputs(root):
    runner = CliRunner()
    res = runner.invoke(app, ["breakeven", str(root / "workloads/rl-rollouts-64.yaml")])
    assert res.exit_code == 0, res.output
    assert "Shortest shared prefix" in res.stdout and "Smallest group" in res.stdout
    doc = json.loads(runner.invoke(app, ["breakeven", "--model", "llama-3-8b", "--prefix", "256,4096",
                                         "--batch", "1,8", "--suffix", "0", "--json"]).stdout)
    assert doc["prefix_tokens"] == [256, 4096] and len(doc["points"]) == 4
    assert {"group_size": 1, "suffix_tokens": 0, "prefix_tokens": None, "fits": None,
            "wins": []} in doc["breakeven_prefix_tokens"]
    csv = runner.invoke(app, ["breakeven", "--model", "llama-3-8b", "--prefix", "256,4096", "--batch", "1,8",
                              "--suffix", "0,128", "--csv"]).stdout.splitlines()
    assert csv[0] == "prefix_tokens,group_size,suffix_tokens,per_sequence_step_s,cascade_step_s,speedup,fits"
    assert len(csv) == 1 + 2 * 2 * 2
    bad = runner.invoke(app, ["breakeven", "--model", "llama-3-8b", "--prefix", "9:1:log"])
    assert bad.exit_code == 2 and "--prefix" in bad.stderr
