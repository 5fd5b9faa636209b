"""The calibration file's one format (cascade_plan/calibration_schema/): shared by the probe and the planner,
its version refused when unknown, and files written by older code still read."""

import json

import pytest

from cascade_plan.calibration.calibration_file import load_probe
from cascade_plan.calibration.probe_params import params_from_probe
from cascade_plan.calibration_schema import document as fmt
from cascade_plan.calibration_schema import quantities
from cascade_plan.inputs import limits
from cascade_plan.inputs.hardware import load_hardware
from cascade_plan.inputs.model_spec import load_preset

from cli_support import GOOD, PROBE_H200, ROOT, refused, run

# Written by `import-aic` on 2026-11-30 (git 9041cba), before `step_parts` moved into `fitted`.
OLD_AIC = ROOT / "tests" / "data" / "calibration-v1-2026-11-30-a100-aic.json"


def test_the_leaf_bounds_are_the_planners_limits():
    for name in ("MAX_CALIBRATION_BYTES", "MAX_COPIES", "MAX_SAMPLES", "MAX_SEQUENCES", "MAX_CONTEXT_TOKENS",
                 "MAX_BLOCK_SIZE", "MAX_HEADS", "MAX_HEAD_DIM", "HBM_BYTES_PER_S", "FLOP_PER_S", "L2_BYTES"):
        assert getattr(quantities, name) == getattr(limits, name), name


def test_probe_and_planner_share_the_version_and_kind():
    from kernels_probe import calibration_file as writer

    assert writer.SCHEMA_VERSION is fmt.SCHEMA_VERSION and writer.KIND is fmt.KIND
    assert fmt.SCHEMA_VERSION in fmt.READABLE_VERSIONS
    assert f"\n{fmt.SCHEMA_VERSION} (" in fmt.__doc__          # the history names the current version


def test_a_file_written_by_older_code_still_reads_with_its_step_parts():
    raw = json.loads(OLD_AIC.read_text())
    assert "step_parts" in raw and "step_parts" not in raw["fitted"]    # the old layout
    hw = load_hardware("a100-80gb")
    p = params_from_probe(load_probe(OLD_AIC), None, "bf16", hw, load_preset("llama-3-8b"))
    assert p.step.source.startswith("aic:aiconfigurator-core 0.12.0")   # not the defaults
    assert not any("no step parts" in n for n in p.notes)
    res = run("estimate", GOOD, "--hardware", "a100-80gb", "--calibration", OLD_AIC, "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["step_parts"]["source"] == p.step.source


@pytest.mark.parametrize("version", [2, 0, "1"])
def test_an_unknown_version_is_one_line_naming_the_file_and_field(tmp_path, version):
    doc = json.loads(OLD_AIC.read_text()) | {"schema_version": version}
    bad = tmp_path / "future.json"
    bad.write_text(json.dumps(doc))
    refused(run("estimate", GOOD, "--hardware", "a100-80gb", "--calibration", bad), "future.json", "schema_version",
            "unsupported")
    refused(run("validate", bad), "future.json", "schema_version")


def test_the_shipped_probe_file_is_the_current_version():
    assert json.loads(PROBE_H200.read_text())["schema_version"] == fmt.SCHEMA_VERSION


def test_a_fit_on_all_rows_says_so_and_passes_the_strict_schema():
    """calibrate marks a KV dtype with too few rows to hold any out (`train_rows`); the fitted section's
    strict structs used to refuse that key, so such a fit could not be written."""
    from cascade_plan.calibration.file_validation import check_fitted

    fitted = json.loads(PROBE_H200.read_text())["fitted"]
    fitted["kv_dtypes"]["fp8"]["triton"]["train_rows"] = "all (too few rows to hold any out)"
    check_fitted(fitted, "x.json")
    fitted["kv_dtypes"]["fp8"]["triton"]["train_row"] = "typo"
    with pytest.raises(Exception, match="train_row"):
        check_fitted(fitted, "x.json")


@pytest.mark.parametrize("where, value, words", [
    (("fitted", "kv_dtypes", "bf16", "flashinfer", "prefix_rows"), "per_warp", "prefix_rows"),
    (("fitted", "kv_dtypes", "fp8", "triton", "decode_rows"), 16, "decode_rows"),
    (("fitted", "step_parts", "moe_layer", "measured", 0, "log2_m"), [9.0, 3.0, 0.0], "strictly ascending"),
    (("fitted", "step_parts", "moe_layer", "measured", 0, "per_layer_s"), [1e-4], "one per_layer_s per point"),
])
def test_the_new_fitted_fields_are_checked_in_one_line(tmp_path, where, value, words):
    """How a backend tiles its rows and the MoE layer term's measured tables: a bad value is one line naming the
    file and the field, exit 2 (numpy would otherwise interpolate an unsorted table silently)."""
    doc = json.loads(PROBE_H200.read_text())
    node = doc
    for k in where[:-1]:
        node = node[k]
    node[where[-1]] = value
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    refused(run("estimate", GOOD, "--hardware", "h200", "--calibration", bad), "bad.json", words)
