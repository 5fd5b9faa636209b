"""The H200 rows of 2026-12-06 and the probe 1.4 run's Triton cascade rows at the rollout starts
(benchmarks/merge_h200_2026_12_06.py): the calibration keeps its own grid, ceilings, probe version and notes; only
the named rows join, each tagged with the run that measured it and that run listed with its probe version; a second
run adds nothing; the shipped file holds them."""

from __future__ import annotations

import json
import runpy
from pathlib import Path
from types import SimpleNamespace

import msgspec

from cascade_plan.calibration.holdout import is_held_out
from cascade_plan.calibration_schema.attention import AttentionConfigDoc
from kernels_probe.merge import measurement_key

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "calibrations" / "h200-probe-2026-12-01.json"


def _script():
    return SimpleNamespace(**runpy.run_path(str(ROOT / "benchmarks" / "merge_h200_2026_12_06.py")))


_key = measurement_key


def test_only_the_named_rows_join_and_the_file_keeps_its_own_header(tmp_path):
    mod = _script()
    doc = json.loads(SHIPPED.read_text())
    added = set()
    for path, keep, _, _ in mod.SOURCES:
        added |= {_key(m) for m in json.loads(path.read_text())["measurements"] if keep(m)}
    base_rows = [m for m in doc["measurements"] if _key(m) not in added]
    axes = doc["grid"]["axes"]         # as the file's grid stood before: no 2K prompts, no 16-token suffixes
    old_axes = {**axes, "prefix_tokens": [v for v in axes["prefix_tokens"] if v != 2048],
                "suffix_tokens": [v for v in axes["suffix_tokens"] if v != 16]}
    base = {**doc, "measurements": base_rows, "grid": {**doc["grid"], "axes": old_axes}}
    (tmp_path / "base.json").write_text(json.dumps(base))
    mod.main([str(tmp_path / "base.json"), str(tmp_path / "out.json")])
    out = json.loads((tmp_path / "out.json").read_text())
    assert out["measurements"][:len(base_rows)] == base_rows
    extra = out["measurements"][len(base_rows):]
    assert {_key(m) for m in extra} == added and len(extra) == len(added)
    for k in ("ceilings", "probe_version", "steps", "step_ops", "created_utc"):
        assert out[k] == base[k]
    # the grid is the file's, its axes widened to the added rows' values (2K prompts, 16-token suffixes)
    assert out["grid"]["mode"] == base["grid"]["mode"] and out["grid"]["backends"] == base["grid"]["backends"]
    for k, vals in base["grid"]["axes"].items():
        assert set(out["grid"]["axes"][k]) == set(vals) | {m["config"][k] for m in extra if k in m["config"]}
    assert {2048, 16} <= set(out["grid"]["axes"]["prefix_tokens"]) | set(out["grid"]["axes"]["suffix_tokens"])
    triton = [m for m in extra if m["backend"] == "triton"]
    assert triton and all(m["kernel"].startswith("cascade_")
                          and is_held_out(msgspec.convert(m["config"], AttentionConfigDoc)) for m in triton)
    fi = [m for m in extra if m["backend"] != "triton"]
    assert len(fi) == 16 and all(m["config"]["kv_dtype"] == "fp8" and m["config"]["q_per_kv"] == 6 for m in fi)
    versions = {r["created_utc"]: r["probe_version"] for r in out["notes"]["runs"]}
    assert all(versions.get(m["run"]) for m in extra)
    # probe 1.4's rows are the rollout starts (no suffix or one page); probe 1.5.5's the seven configurations with
    # no Triton rows, Qwen2.5-1.5B's fp8 rollout start (G 6, 2 KV heads, 512 tokens, 16-token suffix) among them
    by_version = {v: [m for m in triton if versions[m["run"]] == v] for v in ("1.4.0", "1.5.5")}
    assert len(by_version["1.4.0"]) + len(by_version["1.5.5"]) == len(triton)
    assert all(m["config"]["suffix_tokens"] in (0, 16) for m in by_version["1.4.0"])
    configs = {json.dumps(m["config"], sort_keys=True) for m in by_version["1.5.5"]}
    assert len(by_version["1.5.5"]) == 28 and len(configs) == 7
    assert any(m["kernel"] == "cascade_suffix" and m["config"]["q_per_kv"] == 6 and m["config"]["kv_dtype"] == "fp8"
               and m["config"]["suffix_tokens"] == 16 for m in by_version["1.5.5"])
    # a second run over its own output adds nothing and keeps the first one's notes
    mod.main([str(tmp_path / "out.json"), str(tmp_path / "again.json")])
    again = json.loads((tmp_path / "again.json").read_text())
    assert again["measurements"] == out["measurements"] and again["notes"] == out["notes"]


def test_the_shipped_file_holds_them():
    mod = _script()
    doc = json.loads(SHIPPED.read_text())
    have = {_key(m) for m in doc["measurements"]}
    for path, keep, note_key, _ in mod.SOURCES:
        rows = [m for m in json.loads(path.read_text())["measurements"] if keep(m)]
        assert rows and {_key(m) for m in rows} <= have
        assert note_key in doc["notes"]
