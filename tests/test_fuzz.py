"""Robustness fuzz, bounded profile for CI (well under a minute): generated and mutated workloads
through the library calls the CLI makes and through the CLI. Any input must give a correct answer
(finite, non-negative numbers; invariants kept) or one error line and exit 2. The long profile is
benchmarks/fuzz_campaign.py; both use tests/fuzz_support.py."""

import json
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cascade_plan.cli.app import app  # noqa: E402

import fuzz_support as fz  # noqa: E402


def ci(examples: int) -> settings:
    return settings(max_examples=examples, deadline=None, database=None, derandomize=True,
                    suppress_health_check=list(HealthCheck))


@pytest.mark.slow
@ci(150)
@given(doc=st.one_of(fz.workloads(), fz.workloads(odd=3)), mutation=st.sampled_from(range(len(fz.TEXT_MUTATIONS))),
       mode=st.sampled_from(fz.MODES))
def test_any_workload_is_answered_correctly_or_refused_in_one_line(tmp_path_factory, doc, mutation, mode):
    text = fz.TEXT_MUTATIONS[mutation](fz.dump(doc))
    outcome, peak = fz.run_workload(text, mode, tmp_path_factory.mktemp("w"))
    assert not fz.is_defect(outcome), (outcome, text)
    assert peak < 200 * 2**20, (peak, text)


@ci(60)
@given(case=fz.workloads_with_files(), mode=st.sampled_from(["ideal", "default", "calibrated"]))
def test_generated_model_configs_and_hardware_profiles(tmp_path_factory, case, mode):
    doc, files = case
    outcome, _ = fz.run_workload(fz.dump(doc), mode, tmp_path_factory.mktemp("f"), files)
    assert not fz.is_defect(outcome), (outcome, files)


SHIPPED_CALIBRATION = json.loads(next((fz.ROOT / "calibrations").glob("h200-*.json")).read_text())


@ci(15)
@given(edits=fz.calibration_edits(), backend=st.sampled_from([None, "triton", "torch"]))
def test_edited_calibration_files(tmp_path_factory, edits, backend):
    outcome = fz.run_calibration(fz.edited_calibration(SHIPPED_CALIBRATION, edits), backend,
                                 tmp_path_factory.mktemp("cal"))
    assert not fz.is_defect(outcome), (outcome, edits)


# cheap to falsify: any shared-nothing tree would show a cascade win at once (thorough profile: 250)
@pytest.mark.slow
@ci(25)
@given(doc=fz.no_sharing_workloads(), mode=st.sampled_from(fz.MODES))
def test_without_sharing_cascade_never_wins(tmp_path_factory, doc, mode):
    outcome, _ = fz.run_workload(fz.dump(doc), mode, tmp_path_factory.mktemp("w"))
    assert outcome in ("answered", "refused"), outcome


@ci(30)
@given(doc=st.one_of(fz.workloads(), fz.workloads(odd=3)), mutation=st.sampled_from(range(len(fz.TEXT_MUTATIONS))),
       command=st.sampled_from(["estimate", "check", "breakeven"]), what_if=fz.what_if_options())
def test_cli_exit_codes_and_one_line_errors(tmp_path_factory, doc, mutation, command, what_if):
    path = tmp_path_factory.mktemp("c") / "w.yaml"
    path.write_bytes(fz.TEXT_MUTATIONS[mutation](fz.dump(doc)).encode("utf-8", "surrogatepass"))
    args = {"estimate": ["estimate", str(path), "--json"],
            "check": ["check", str(path), "--min-run-speedup", "1.1"],
            "breakeven": ["breakeven", str(path), "--prefix", "64:8192:log", "--batch", "1:64:log",
                          "--json"]}[command] + what_if
    res = CliRunner().invoke(app, args)
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    assert res.exit_code in ({0, 1, 2} if command == "check" else {0, 2}), res.output
    if res.exit_code == 2:
        assert len(res.stderr.strip().splitlines()) == 1, res.stderr


# ---- the commands that landed after the first fuzz (route, rl, simulate-log, analyze, import-aic, workloads,
# schema, probe's arguments): tests/fuzz_commands.py

import fuzz_commands as fc  # noqa: E402


@pytest.mark.slow
@ci(50)
@given(case=fc.commands(st.one_of(fz.workloads(), fz.workloads(odd=3)).map(fz.dump)))
def test_every_command_answers_or_refuses_in_one_line(tmp_path_factory, monkeypatch, case):
    from cascade_plan.inputs import limits

    monkeypatch.setattr(limits, "MAX_LOG_ROWS", 200_000)       # CI: simulated logs of a few MB at most
    # import-aic's arguments only, as fuzz_commands.small_commands says: with aiconfigurator-core installed (the
    # test extra), `import-aic all` without --aic-data fitted every GPU from the real tables (97 s of one example).
    # Fitting is tested on a fixture of the tables' format (tests/test_aic_import.py).
    monkeypatch.setitem(sys.modules, "aiconfigurator_core", None)
    argv, files = case
    outcome, peak, _ = fc.run_command(argv, files, tmp_path_factory.mktemp("cmd"))
    assert not fc.is_defect(outcome), (outcome, argv)
    assert peak < 300 * 2**20, (peak, argv)
