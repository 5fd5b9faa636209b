"""The MoE layer term (router, alignment, combine, per touched expert) and MLA's per-layer glue: the op
modules by hand, the fit on the no-attention step rows only (never on whole steps), its storage, the
merge script that carries the rows, `validate`'s MoE tables and the MoE workloads' verdict margin."""

from __future__ import annotations

import copy
import importlib.util
import json
import pathlib

import msgspec
import numpy as np
import pytest
from typer.testing import CliRunner

from cascade_plan.calibration.calibration_file import ProbeData, load_probe
from cascade_plan.calibration.moe_layer_fit import OP, _features, fit_moe_layer
from cascade_plan.calibration.moe_rows import with_moe_tables
from cascade_plan.calibration.step_fit import fit_step_parts
from cascade_plan.calibration.step_parts_doc import read_step_parts, step_parts_json
from cascade_plan.cli.app import app
from cascade_plan.cost.ops import mla_glue, moe_dispatch
from cascade_plan.cost.ops.context import StepContext
from cascade_plan.cost.step_parts import GlueParams, MoeLayerParams, StepParts
from cascade_plan.inputs.hardware import load_hardware
from cascade_plan.inputs.model_spec import load_preset

H200 = load_hardware("h200")
P = MoeLayerParams(per_layer_s=100e-6, per_token_hidden_layer_s=1e-12, per_expert_layer_s=1e-6,
                   mla_per_layer_s=20e-6, basis="hand")
PARTS = StepParts(gemm={}, glue=GlueParams(), moe_layer=P)
CAL = "calibrations/h200-probe-2026-12-01.json"


def ctx(model, tp, tokens, parts, weight_dtype="bf16") -> StepContext:
    """The context an op prices from (the dispatch and MLA glue ops read no rates)."""
    return StepContext(model, tp, weight_dtype, np.asarray(tokens, float), 0.0, 0.0, parts)


def test_dispatch_by_hand() -> None:
    mixtral = load_preset("mixtral-8x7b")        # 32 MoE layers, 8 experts, top 2, hidden 4096
    t = moe_dispatch.cost(ctx(mixtral, 1, np.array([0.0, 16.0]), PARTS)).time_s
    touched = 8 * (1 - (6 / 8) ** 16)            # 7.9198 experts read by 16 tokens
    per_layer = 100e-6 + 16 * 4096 * 1e-12 + touched * 1e-6
    assert t[0] == 0.0
    assert t[1] == pytest.approx(32 * per_layer, rel=1e-12)
    assert t[1] == pytest.approx(3.4555e-3, rel=1e-4)
    # dense models and calibrations without the fit: no term
    assert moe_dispatch.cost(ctx(load_preset("llama-3-8b"), 1, np.array([16.0]), PARTS)) is None
    assert moe_dispatch.cost(ctx(mixtral, 1, np.array([16.0]), msgspec.structs.replace(PARTS, moe_layer=None))) is None


def test_mla_glue_by_hand() -> None:
    ds = load_preset("deepseek-v3")              # 61 MLA layers
    t = mla_glue.cost(ctx(ds, 1, np.array([0.0, 256.0]), PARTS)).time_s
    assert list(t) == pytest.approx([0.0, 61 * 20e-6])
    assert mla_glue.cost(ctx(load_preset("mixtral-8x7b"), 1, np.array([8.0]), PARTS)) is None


def test_step_parts_round_trip_and_absent_key() -> None:
    probe = load_probe(pathlib.Path(CAL))
    parts = read_step_parts(probe.doc["fitted"]["step_parts"])
    assert parts.moe_layer is not None
    again = read_step_parts(step_parts_json(parts))
    assert again.moe_layer == parts.moe_layer
    # a file without the fit writes no moe_layer key (every imported file stays as it was)
    assert "moe_layer" not in step_parts_json(msgspec.structs.replace(parts, moe_layer=None))


def _probe_with(doc: dict) -> ProbeData:
    return ProbeData(CAL, doc)


def test_fit_reads_only_the_no_attention_rows(root) -> None:
    doc = json.loads((root / CAL).read_text())
    base = fit_step_parts(_probe_with(copy.deepcopy(doc)), H200, "x").moe_layer
    assert base is not None and base.n_train == 16
    assert "qwen3" not in base.basis           # Qwen3-30B-A3B is held out: no rows of it are fitted
    # the whole steps (with attention) change by 2x: the fit does not move
    moved = copy.deepcopy(doc)
    for r in moved["steps"]:
        if r.get("step_kind"):
            r["median_s"] *= 2
    assert fit_step_parts(_probe_with(moved), H200, "x").moe_layer == base
    # the no-attention rows change: it does
    slower = copy.deepcopy(doc)
    for r in slower["step_ops"]:
        if r["op"] == OP:
            r["median_s"] *= 1.2
    assert fit_step_parts(_probe_with(slower), H200, "x").moe_layer.per_layer_s > base.per_layer_s * 1.2


def test_fit_recovers_planted_parameters(root) -> None:
    doc = json.loads((root / CAL).read_text())
    probe = _probe_with(doc)
    rows = probe.step_ops
    plain = fit_step_parts(probe, H200, "x")
    parts = with_moe_tables(msgspec.structs.replace(plain, moe_layer=None), rows)
    truth = np.array([80e-6, 30e-12, 0.5e-6, 25e-6])
    planted = []
    for r in rows:
        if r.op == OP:
            _, priced, x, *_ = _features(r, parts, H200)
            r = msgspec.structs.replace(r, median_s=priced + float(x @ truth))
        planted.append(r)
    got = fit_moe_layer(planted, parts, H200)
    assert [got.per_layer_s, got.per_token_hidden_layer_s, got.per_expert_layer_s, got.mla_per_layer_s] == \
        pytest.approx(list(truth), rel=1e-6)
    assert got.train_max_ape < 1e-9
    assert fit_moe_layer([r for r in planted if r.op != OP], parts, H200) is None


def test_merge_carries_the_no_attention_rows_once() -> None:
    path = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "merge_moe_steps.py"
    spec = importlib.util.spec_from_file_location("merge_moe_steps", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    step = {"step_kind": "moe", "workload": "w", "position": "first", "backend": "triton", "mode": "cascade",
            "kv_dtype": "bf16", "weight_dtype": "bf16", "tp": 1, "model": "mixtral-8x7b",
            "model_config": {"hidden_size": 4096}, "median_s": 0.03}
    op = {"op": "moe_step_no_attention", "config": {"model": "mixtral-8x7b", "tp": 1, "m": 8, "layers": 32,
                                                    "weight_dtype": "bf16", "kv_dtype": "bf16", "glue": "fused",
                                                    "skip": ["attention"]}, "median_s": 0.024, "per_layer_s": 7.5e-4}
    part = {"op": "moe_step_part", "config": {**op["config"]}, "median_s": 0.02}
    rows = {"kind": "moe_step_rows", "created_utc": "T1", "device": {"name": "NVIDIA H200"}, "steps": [step],
            "step_skipped": [{"workload": "w", "reason": "oom"}], "step_ops": [op, part]}
    cal = {"device": {"name": "NVIDIA H200"}, "steps": [], "step_ops": [{"op": "gemm", "config": {"m": 1}}],
           "notes": {"runs": []}}
    once = mod.merge(copy.deepcopy(rows), copy.deepcopy(cal))
    twice = mod.merge(copy.deepcopy(rows), copy.deepcopy(once))       # the same run merged again
    layer = [r for r in twice["step_ops"] if r["op"] == OP]
    assert len(layer) == 1 and layer[0]["config"]["dtype"] == "bf16"
    assert layer[0]["model_config"] == {"hidden_size": 4096} and layer[0]["median_s"] == 0.024
    assert not any(r["op"] == "moe_step_part" for r in twice["step_ops"])
    assert len(twice["notes"]["runs"]) == 1 and len(twice["step_skipped"]) == 1 and len(twice["steps"]) == 1
    assert twice["notes"]["runs"][0]["grid"]["moe_layer_rows"] == 1


@pytest.mark.xdist_group("validate")        # conftest.py: one `validate --json --plots` for the tests that read it
def test_validate_reports_the_moe_steps(h200_validate_command) -> None:
    # the text tables are checked under validate's help example (help_example_outputs.py)
    moe = h200_validate_command[0]["steps"]["moe_mla"]
    assert set(moe["summary"]) == {"moe", "mla_moe"}
    # the DeepSeek-V3 shard, priced with the MoE layer term: every step within 10% (it was 26-38% too fast)
    ds = [p for p in moe["points"] if p["step_kind"] == "mla_moe"]
    assert ds and max(abs(p["per_sequence_error"]) for p in ds) < 0.10


def test_the_stored_moe_speedup_errors_are_the_recomputed_ones(root) -> None:
    from cascade_plan.planning.speedup_margin import moe_speedup_errors

    probe = load_probe(root / CAL)
    stored = probe.doc["fitted"]["speedup_errors"]["moe_fits"]
    fresh = moe_speedup_errors(probe, H200)
    assert set(stored) == set(fresh) == {"moe", "mla_moe"}
    for kind, per in fresh.items():
        for backend, errs in per.items():
            assert stored[kind][backend] == pytest.approx(errs, rel=1e-9, abs=1e-12), (kind, backend)


def test_deepseek_margin_rests_on_the_whole_mla_moe_steps() -> None:
    res = CliRunner().invoke(app, ["estimate", "deepseek-v3-grpo-tp8", "--hardware", "h200", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    margin = out["go_no_go"]["margin"]
    assert "whole MLA + MoE steps measured on the H200" in margin["source"]
    assert margin["error"] < 0.05               # the DeepSeek shard's speedups, predicted within 1.8%
    assert "no whole MLA step timed" not in json.dumps(out)
    assert out["moe_source"]["layer"].startswith("router, alignment and combine")


def test_a_measured_layer_shape_is_priced_from_its_rows() -> None:
    """Inside the batch sizes the probe measured a layer shape at (Mixtral-8x7B TP 1 bf16, DeepSeek-V3 TP 8 fp8),
    the MoE layer term is the measurement: exact at a measured M; another TP, weight dtype or model, or a batch
    beyond the rows, gets the fit. The tables survive the file's round trip."""
    from cascade_plan.calibration.calibration_file import find_committed
    from cascade_plan.calibration.probe_params import step_parts_of
    from cascade_plan.cost.step_parts import moe_layer_key

    parts = step_parts_of(find_committed(H200))
    tables = parts.moe_layer.measured
    mixtral = load_preset("mixtral-8x7b")
    assert {t.key for t in tables} == {moe_layer_key(mixtral, 1, "bf16"),
                                       moe_layer_key(load_preset("deepseek-v3"), 8, "fp8")}
    table = parts.moe_layer.table_for(moe_layer_key(mixtral, 1, "bf16"))
    m = 2.0 ** np.array(table.log2_m)
    assert list(m) == [1, 8, 16, 32, 64, 128, 256, 512]
    got = moe_dispatch.cost(ctx(mixtral, 1, m, parts, "bf16")).time_s
    assert list(got) == pytest.approx([32 * t for t in table.per_layer_s], rel=1e-9)
    fit_only = msgspec.structs.replace(parts, moe_layer=msgspec.structs.replace(parts.moe_layer, measured=()))
    for tp, wd, tokens in ((2, "bf16", m), (1, "fp8", m), (1, "bf16", np.array([1024.0]))):
        assert list(moe_dispatch.cost(ctx(mixtral, tp, tokens, parts, wd)).time_s) == \
            list(moe_dispatch.cost(ctx(mixtral, tp, tokens, fit_only, wd)).time_s)
    assert not np.allclose(got, moe_dispatch.cost(ctx(mixtral, 1, m, fit_only, "bf16")).time_s, rtol=1e-3)
    assert read_step_parts(step_parts_json(parts)).moe_layer == parts.moe_layer
    assert "measured for this layer shape" in moe_dispatch.describe(mixtral, parts, 1, "bf16")
    assert "measured" not in moe_dispatch.describe(mixtral, parts, 2, "bf16")
