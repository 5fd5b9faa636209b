"""FlashInfer's probe 1.4 rows added to the H200 calibration (benchmarks/merge_h200_2026_12_05.py): only FlashInfer's,
only at configurations the file lacks, every other row as it was; and the shipped file holds them."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import msgspec

from cascade_plan.calibration.holdout import is_held_out
from cascade_plan.calibration_schema.attention import AttentionConfigDoc

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "benchmarks" / "raw" / "h200-2026-12-04" / "all-probe-1.4.json"
SHIPPED = ROOT / "calibrations" / "h200-probe-2026-12-01.json"


def _script():
    spec = importlib.util.spec_from_file_location("merge_0512", ROOT / "benchmarks" / "merge_h200_2026_12_05.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _key(m: dict) -> str:
    return json.dumps([m["backend"], m["kernel"], m.get("variant"), m["config"]], sort_keys=True)


def test_only_flashinfer_rows_the_file_lacks_are_added(tmp_path):
    base = tmp_path / "base.json"
    doc = json.loads(SHIPPED.read_text())
    run = json.loads(RUN.read_text())
    added = {_key(m) for m in run["measurements"] if m["backend"] in ("flashinfer", "flashinfer-fa2")}
    doc["measurements"] = [m for m in doc["measurements"] if _key(m) not in added][:50]   # a small base lacking them
    base.write_text(json.dumps(doc))
    out = tmp_path / "out.json"
    _script().main([str(base), str(out)])
    new = json.loads(out.read_text())
    assert new["measurements"][:50] == doc["measurements"]
    extra = new["measurements"][50:]
    assert extra and {m["backend"] for m in extra} == {"flashinfer", "flashinfer-fa2"}
    assert {_key(m) for m in extra} == added
    assert new["steps"] == doc["steps"] and new["step_ops"] == doc["step_ops"]
    assert f"{len(extra)} FlashInfer rows" in new["notes"]["flashinfer_rows_2026_12_04"]
    # run again on its own output: nothing more to add
    _script().main([str(out), str(tmp_path / "again.json")])
    assert json.loads((tmp_path / "again.json").read_text())["measurements"] == new["measurements"]


def test_the_shipped_file_holds_the_rollout_start_rows_and_probe_1_3_triton():
    doc = json.loads(SHIPPED.read_text())
    starts = [m for m in doc["measurements"] if m["backend"] == "flashinfer" and m["config"]["n_groups"] == 64
              and m["config"]["group_size"] == 16 and m["config"]["prefix_tokens"] == 512
              and m["config"]["suffix_tokens"] in (0, 16)]
    assert {(m["config"]["q_per_kv"], m["config"]["head_dim"]) for m in starts} >= {(4, 128), (6, 128), (7, 64)}
    # of the probe 1.4 run's Triton rows, only its cascade rows at held-out rollout starts joined
    # (benchmarks/merge_h200_2026_12_06.py): every decode row and every row the fits train on stays probe 1.3's
    run_keys = {_key(m) for m in json.loads(RUN.read_text())["measurements"] if m["backend"] == "triton"}
    from_1_4 = [m for m in doc["measurements"] if m["backend"] == "triton" and _key(m) in run_keys
                and m["run"].startswith("2026-12-04")]
    assert from_1_4 and all(m["kernel"].startswith("cascade_") and m["config"]["suffix_tokens"] in (0, 16)
                            for m in from_1_4)
    assert all(is_held_out(msgspec.convert(m["config"], AttentionConfigDoc)) for m in from_1_4)
