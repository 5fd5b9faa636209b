"""The probe writes through the calibration schema (cascade_plan/calibration_schema/probe_rows.py): the shipped H200
file decodes into the writer's structs and encodes back to what it holds, the writer writes it byte for byte as it
is, and refuses a document with a row that lacks a field or has one the schema does not know."""

from __future__ import annotations

import copy
import json

import msgspec
import pytest

from cascade_plan.calibration_schema.probe_rows import ProbeCeilings, ProbeDocument
from kernels_probe import calibration_file
from kernels_probe.runner import UNMEASURED_CEILINGS

from cli_support import ROOT

SHIPPED = ROOT / "calibrations" / "h200-probe-2026-12-01.json"


@pytest.fixture(scope="module")
def shipped() -> dict:
    return json.loads(SHIPPED.read_text())


def _first_difference(a, b, path="$") -> str | None:
    """Where two JSON values first differ (a key lost or added, a value or its type changed); None if nowhere."""
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return f"{path}: keys {sorted(a.keys() ^ b.keys())}"
        return next((d for k in a if (d := _first_difference(a[k], b[k], f"{path}.{k}"))), None)
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return next((d for i, (x, y) in enumerate(zip(a, b)) if (d := _first_difference(x, y, f"{path}[{i}]"))), None)
    return None if (a == b and type(a) is type(b)) else f"{path}: {a!r} != {b!r}"


def test_the_shipped_file_round_trips_through_the_writers_structs(shipped):
    doc = msgspec.json.decode(SHIPPED.read_bytes(), type=ProbeDocument)
    back = json.loads(msgspec.json.encode(doc))
    # nothing lost, nothing added, every number of the type it was (an integer byte count stays one)
    assert _first_difference(shipped, back) is None
    assert _first_difference({"a": [1, {"b": None}]}, {"a": [1.0, {"b": None}]}) == "$.a[0]: 1 != 1.0"
    assert _first_difference({"a": {"b": None}}, {"a": {}}) == "$.a: keys ['b']"
    assert all(section in back for section in ("mla", "step_ops", "steps", "step_skipped"))


def test_the_writer_writes_the_file_as_it_is(shipped, tmp_path):
    out = calibration_file.write_atomic(tmp_path / "cal.json", shipped)
    assert out.read_bytes() == SHIPPED.read_bytes(), "the writer changed the shipped file's bytes"


def _one_of_each(shipped: dict) -> dict:
    doc = {k: v for k, v in shipped.items() if not isinstance(v, list)}
    for section in ("measurements", "skipped", "mla", "step_ops", "steps", "step_skipped"):
        doc[section] = [shipped[section][0]]
    doc["mla_skipped"] = [{"config": shipped["mla"][0]["config"], "kernel": "decode", "reason": "correctness: 0.1"}]
    return doc


@pytest.mark.parametrize("section", ["measurements", "skipped", "mla", "step_ops", "steps", "step_skipped",
                                     "mla_skipped"])
def test_the_writer_refuses_a_row_with_a_missing_or_unknown_field(shipped, tmp_path, section):
    base = _one_of_each(shipped)
    assert calibration_file.validate_document(base) == []
    unknown = copy.deepcopy(base)
    unknown[section][0]["median_ms"] = 1.0
    missing = copy.deepcopy(base)
    del missing[section][0]["reason" if "skipped" in section else "median_s"]
    for doc, says in ((unknown, "unknown field `median_ms`"), (missing, "missing required field")):
        with pytest.raises(ValueError, match=says):
            calibration_file.write_atomic(tmp_path / "x.json", doc)
        # the target is not written; the run's rows are kept beside it, as they were
        assert [p.name for p in tmp_path.iterdir()] == ["x.json.refused.json"]
        assert json.loads((tmp_path / "x.json.refused.json").read_text()) == doc


def test_the_writer_refuses_an_unknown_field_in_a_config_the_device_or_the_top_level(shipped, tmp_path):
    base = _one_of_each(shipped)
    for change in (lambda d: d["measurements"][0]["config"].update(window=0),
                   lambda d: d["steps"][0]["config"].update(beam=2),
                   lambda d: d["step_ops"][0]["config"].update(layout="nt"),
                   lambda d: d["device"].update(clock_mhz=1980),
                   lambda d: d["ceilings"].update(l2_read_bytes_per_s=1e13),
                   lambda d: d.update(step_glue="fused")):
        d = copy.deepcopy(base)
        change(d)
        assert "unknown field" in " ".join(calibration_file.validate_document(d))


def test_a_run_without_ceilings_writes_a_file_the_format_accepts():
    assert msgspec.convert(UNMEASURED_CEILINGS, ProbeCeilings).hbm_read_bytes_per_s == 1e9


def test_a_row_timed_twice_keeps_its_first_rounds_median(shipped):
    """kernels_probe/runner.py times a long row again and records the first round's median beside the kept one."""
    doc = _one_of_each(shipped)
    doc["measurements"][0]["first_round_median_s"] = 1.2 * doc["measurements"][0]["median_s"]
    assert calibration_file.validate_document(doc) == []
    doc["measurements"][0]["first_round_median_s"] = -1.0
    assert calibration_file.validate_document(doc) != []
