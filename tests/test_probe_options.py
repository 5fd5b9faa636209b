"""`python -m kernels_probe` and `cascade-plan probe` read their options from one definition
(kernels_probe.options): the same names, help, defaults and bounds on both, and the same bad values refused."""

from __future__ import annotations

import argparse

import pytest
import typer.main
from typer.testing import CliRunner

from cascade_plan.cli.app import app
from kernels_probe.__main__ import main as module_main
from kernels_probe.options import MODULE_ORDER, PROBE_OPTIONS, SHARED, build_parser


def _cli_params() -> dict:
    cmd = typer.main.get_command(app).commands["probe"]
    return {p.name: p for p in cmd.params}


def _module_actions() -> dict[str, argparse.Action]:
    return {a.dest: a for a in build_parser()._actions if a.dest != "help"}


def test_every_option_is_defined_once_and_the_module_has_them_all():
    assert set(_module_actions()) == set(MODULE_ORDER) == set(PROBE_OPTIONS)
    cli = _cli_params()
    assert set(SHARED) <= set(cli)
    # the module-only options are not on the CLI (it derives the plan from --workload itself)
    assert not (set(PROBE_OPTIONS) - set(SHARED)) & set(cli)


@pytest.mark.parametrize("name", SHARED)
def test_shared_option_agrees_on_both_front_ends(name):
    spec, p, a = PROBE_OPTIONS[name], _cli_params()[name], _module_actions()[name]
    assert p.opts == a.option_strings == [spec.flag]
    assert p.help == a.help == spec.help
    assert p.required == a.required == spec.required
    if spec.kind == "flag":
        assert p.is_flag and isinstance(a, argparse._StoreTrueAction)
        assert p.default is a.default is spec.default is False
        return
    assert p.default == a.default == spec.default
    assert p.multiple == isinstance(a, argparse._AppendAction) == (spec.kind == "repeat")
    lo, hi = getattr(p.type, "min", None), getattr(p.type, "max", None)
    assert (lo, hi) == (getattr(a.type, "min", None), getattr(a.type, "max", None)) == (spec.min, spec.max)


def test_the_bounds_are_real():
    assert (PROBE_OPTIONS["page_size"].min, PROBE_OPTIONS["page_size"].max) == (1, 4096)
    assert PROBE_OPTIONS["page_size"].default == 16 and PROBE_OPTIONS["grid"].default == "full"
    assert PROBE_OPTIONS["time_budget"].min == 1


@pytest.mark.parametrize("args,flag", [
    (["--page-size", "0"], "--page-size"),
    (["--page-size", "4097"], "--page-size"),
    (["--page-size", "x"], "--page-size"),
    (["--time-budget", "0.5"], "--time-budget"),
    (["--backend", "nope"], "--backend"),
    (["--grid", "nope"], "--grid"),
])
def test_both_front_ends_refuse_the_same_bad_values(tmp_path, capsys, args, flag):
    out = tmp_path / "cal.json"
    with pytest.raises(SystemExit) as exc:
        module_main(["--out", str(out), *args])
    assert exc.value.code == 2
    assert flag in capsys.readouterr().err
    res = CliRunner().invoke(app, ["probe", "--out", str(out), *args])
    assert res.exit_code == 2 and flag in res.stderr and "Traceback" not in res.output
    assert not out.exists()
