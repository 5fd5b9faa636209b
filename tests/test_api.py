"""The front door: `cascade_plan` names the library API lazily (importing it imports nothing else), every
name in `__all__` resolves, and the API gives the numbers the CLI prints."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import cascade_plan as cp

ROOT = Path(__file__).resolve().parents[1]


def test_importing_the_package_imports_nothing_else() -> None:
    code = ("import sys; before = set(sys.modules); import cascade_plan; "
            "print(sorted(m for m in set(sys.modules) - before))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT,
                         env={"PYTHONPATH": str(ROOT), "PATH": ""})
    # the version leaf alone (three lines, no imports of its own)
    assert json.loads(out.stdout.replace("'", '"')) == ["cascade_plan", "cascade_plan.version"]


@pytest.mark.parametrize("name", cp.__all__)
def test_every_exported_name_resolves(name: str) -> None:
    value = getattr(cp, name)
    assert value is not None
    assert name in dir(cp)
    if name != "__version__":
        # what the table names is what the module holds
        module, attribute = cp._API[name]
        assert value is getattr(sys.modules[module], attribute)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'estimat'"):
        cp.estimat  # noqa: B018


def test_the_api_gives_what_estimate_prints() -> None:
    from cascade_plan.cli.app import app

    scn = cp.load_scenario(Path("rl-rollouts-64"))
    est = cp.assess(scn, cp.select_params(scn, cp.ParamsChoice(ideal=True)))
    printed = CliRunner().invoke(app, ["estimate", "rl-rollouts-64", "--ideal", "--json"])
    assert printed.exit_code == 0, printed.output
    assert cp.estimate_json(est) == json.loads(printed.output)
    assert cp.estimate_json(est)["tool_version"] == cp.__version__


def test_ideal_needs_no_scenario_and_refuses_a_calibration() -> None:
    assert cp.select_params(None, cp.ParamsChoice(ideal=True)) is cp.IDEAL
    assert cp.select_params(None) is cp.DEFAULT
    with pytest.raises(cp.InputError, match="--ideal uses peak numbers"):
        cp.select_params(None, cp.ParamsChoice(ideal=True, backend="triton"))
