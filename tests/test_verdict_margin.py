"""Verdicts held to the measured error of their numbers: a go only where the run speedup clears 1x by
more than the speedup error validate measures for that backend and regime (or the defaults' error)."""

import json

import msgspec
import pytest
from typer.testing import CliRunner

from cascade_plan import DEFAULT, IDEAL, ParamsChoice, assess, load_hardware, load_scenario, select_params
from cascade_plan.calibration.calibration_file import load_probe
from cascade_plan.calibration.step_validation import speedup_errors, validate_steps
from cascade_plan.cli.app import app
from cascade_plan.cost.verdict import clears_margin, go_no_go, with_margin
from cascade_plan.planning.speedup_margin import speedup_margin

runner = CliRunner()


@pytest.fixture
def rollouts(root):
    return load_scenario(root / "workloads/rl-rollouts-64.yaml")


def test_the_readme_first_example_is_marginal_not_go(rollouts):
    """1.01x on the H100 (1.03x before FA3's cascade rows were timed back to back, as a step runs them): within the
    error the flashinfer numbers were off by on the H200's whole steps."""
    doc = json.loads(runner.invoke(app, ["estimate", "rl-rollouts-64", "--json"]).stdout)
    v = doc["go_no_go"]
    assert doc["hardware"] == "h100-sxm" and 1.0 < doc["run"]["speedup"] < 1.05
    assert v["level"] == "marginal"
    assert v["text"].startswith("Marginal: within the error of these numbers (±")
    assert v["margin"]["error"] > doc["run"]["speedup"] - 1
    assert "flashinfer kernels" in v["margin"]["source"] and "H200" in v["margin"]["source"]


def test_the_margin_is_validates_largest_speedup_error_for_that_backend(root, rollouts):
    probe = load_probe(root / "calibrations/h200-probe-2026-12-01.json")
    hw = load_hardware("h200")
    pts = validate_steps(probe, hw)["points"]
    for backend in ("flashinfer", "flashinfer-fa2", "triton"):
        params = select_params(msgspec.structs.replace(rollouts, hardware=hw), ParamsChoice(backend=backend))
        m = speedup_margin(params, "llama-3-8b")
        probed = [abs(p["speedup_error"]) for p in pts if p["backend"] == backend and not p["held_out_shape"]
                  and not p["regimes"]]
        assert m.error == pytest.approx(max(probed)) and m.n_steps == len(probed)
        # a held-out shape outside the regimes (those steps are their own summary in validate)
        held = [abs(p["speedup_error"]) for p in pts if p["backend"] == backend and p["held_out_shape"]
                and not p["regimes"]]
        assert speedup_margin(params, "qwen2.5-7b").error == pytest.approx(max(held))   # a held-out shape
    errs = speedup_errors(probe, hw, DEFAULT)
    assert speedup_margin(DEFAULT, "llama-3-8b").error == pytest.approx(
        max(abs(e) for per in errs.values() for r in per.values() for e in r))
    assert speedup_margin(IDEAL, "llama-3-8b") is None          # a bound, not a prediction


def test_go_needs_the_speedup_to_clear_the_error():
    v = go_no_go(4e9, 1e9, 1.08)
    assert v.level == "go"
    assert with_margin(v, 1.08, 0.05, "s").level == "go"
    low = with_margin(v, 1.04, 0.05, "s")
    assert low.level == "marginal" and "within the error of these numbers (±5.0%)" in low.text
    assert low.to_json()["margin"] == {"error": 0.05, "source": "s"}
    assert with_margin(go_no_go(4e9, 1e9, 0.9), 0.9, 0.05, "s").level == "no-go"
    assert clears_margin(1.0501, 0.05) and not clears_margin(1.05, 0.05)


def test_a_measured_go_that_clears_its_error_stays_go(rollouts):
    h200 = msgspec.structs.replace(rollouts, hardware=load_hardware("h200"))
    v = assess(h200, select_params(h200, ParamsChoice(backend="triton"))).verdict
    assert v.level == "go" and v.margin_error < 0.1 and "clears 1x by more than the measured error" in v.text


def test_check_margin_judges_the_speedup_less_its_error(root):
    wl = str(root / "workloads/rl-rollouts-64.yaml")
    plain = runner.invoke(app, ["check", wl, "--min-run-speedup", "1.0"])
    assert plain.exit_code == 0 and "min_run_speedup: 1.01x >= 1.00x" in plain.stdout
    res = runner.invoke(app, ["check", wl, "--min-run-speedup", "1.0", "--margin"])
    assert res.exit_code == 1
    assert "1.01x less its ±3.9% error) < 1.00x" in res.stdout


def test_the_stored_speedup_errors_are_the_recomputed_ones(root):
    """`calibrate` stores the fits' and the defaults' speedup errors on the measured steps so that `estimate`
    need not predict every step at start-up; they must be exactly what validating the file gives now."""
    from cascade_plan.planning.speedup_margin import measured_speedup_errors

    probe = load_probe(root / "calibrations/h200-probe-2026-12-01.json")
    stored = probe.doc["fitted"]["speedup_errors"]
    fresh = measured_speedup_errors(probe, load_hardware("h200"))
    assert stored["probed_models"] == fresh["probed_models"] == ["llama-3-8b", "llama-3.2-1b", "llama-3.2-3b",
                                                                 "qwen3-0.6b"]
    for kind in ("fits", "defaults"):
        assert set(stored[kind]) == set(fresh[kind])
        for backend, per in fresh[kind].items():
            for regime, errs in per.items():
                assert stored[kind][backend][regime] == pytest.approx(errs, rel=1e-9, abs=1e-12), \
                    (kind, backend, regime)
