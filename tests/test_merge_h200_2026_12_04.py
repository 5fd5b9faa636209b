"""The probe 1.4 candidate calibration (benchmarks/merge_h200_2026_12_04.py): its steps are the re-timed Triton rows
laid over the `all` grid's file, the stale probe 1.3 Triton rows dropped, everything else kept as it was."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RAW = ROOT / "benchmarks" / "raw" / "h200-2026-12-04"


def _script():
    spec = importlib.util.spec_from_file_location("merge_0412", ROOT / "benchmarks" / "merge_h200_2026_12_04.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_candidate_holds_the_retimed_triton_steps_and_nothing_stale(tmp_path):
    out = tmp_path / "cand.json"
    _script().main([str(out)])
    doc, base = json.loads(out.read_text()), json.loads((RAW / "all-probe-1.4.json").read_text())
    new = json.loads((RAW / "triton-steps.json").read_text())
    assert doc["probe_version"] == base["probe_version"] == "1.4.0" and doc["ceilings"] == base["ceilings"]
    assert doc["measurements"] == base["measurements"] and doc["step_ops"] == base["step_ops"]
    dense = [r for r in doc["steps"] if r["backend"] == "triton" and not r.get("step_kind")]
    assert len(new["steps"]) == len(dense) == 70
    assert all(r["run"] == new["created_utc"] for r in dense)
    others = [r for r in doc["steps"] if not (r["backend"] == "triton" and not r.get("step_kind"))]
    assert others == [r for r in base["steps"] if not (r["backend"] == "triton" and not r.get("step_kind"))]
    assert len(base["steps"]) - len(doc["steps"]) == 12 and "12 Triton" in doc["notes"]["stale_dropped"]
