"""The planner's routed experts from measured grouped-GEMM rows: hand-made rows are used as measured
(exactly at a measured M, interpolated between, the model outside), the run says which in --json,
malformed rows are one error line, and dense workloads are untouched."""

from __future__ import annotations

import copy
import json

import msgspec
import numpy as np
import pytest
from typer.testing import CliRunner

from cascade_plan.calibration.calibration_file import ProbeData, find_committed
from cascade_plan.calibration.moe_rows import moe_tables
from cascade_plan.calibration.probe_params import params_from_probe
from cascade_plan.calibration_schema.steps import StepOpRow
from cascade_plan.cli.app import app
from cascade_plan.cost.moe_table import MoeTable, interpolate
from cascade_plan.cost.ops import moe as moe_op
from cascade_plan.cost.ops.context import StepContext
from cascade_plan.errors import InputError
from cascade_plan.inputs.hardware import load_hardware
from cascade_plan.inputs.model_spec import load_preset

H200 = load_hardware("h200")
MIXTRAL = load_preset("mixtral-8x7b")


def _rows(times: dict[int, tuple[float, float]], dtype="bf16", backend="triton", routing="balanced", tp=1):
    """Mixtral-8x7B experts at TP tp: (gate_up, down) seconds per M."""
    ei = 14336 // tp
    out = []
    for m, (gu, dn) in times.items():
        for proj, n, k, t in (("gate_up", 2 * ei, 4096, gu), ("down", 4096, ei, dn)):
            out.append({"op": "moe_grouped_gemm", "config": {"model": "mixtral-8x7b", "tp": tp, "proj": proj, "m": m,
                        "n": n, "k": k, "experts": 8, "top_k": 2, "dtype": dtype, "routing": routing,
                        "backend": backend}, "median_s": t})
    return out


ROWS = _rows({16: (300e-6, 150e-6), 64: (400e-6, 200e-6)})


def _typed(rows: list[dict]) -> list[StepOpRow]:
    return msgspec.convert(rows, list[StepOpRow])


def test_tables_from_rows_by_hand() -> None:
    extra = _rows({16: (1.0, 1.0)}, backend="loop") + _rows({16: (1.0, 1.0)}, routing="skewed")
    extra += _rows({32: (1.0, 1.0)}, backend="grouped_mm")   # triton is preferred where both exist
    tables = moe_tables(_typed(ROWS + extra + [{"op": "gemm", "config": {}}]))
    (t,) = [x for x in tables if x.routing == "balanced"]
    (sk,) = [x for x in tables if x.routing == "skewed"]       # skewed rows: a table of their own
    assert sk.m == (16.0,) and sk.seconds == (2.0,) and sk.backend == "triton"
    assert (t.hidden, t.intermediate, t.experts, t.top_k, t.dtype, t.backend) == (4096, 14336, 8, 2, "bf16", "triton")
    assert t.m == (16.0, 64.0) and t.seconds == pytest.approx((450e-6, 600e-6))
    assert t.matches(MIXTRAL, 1, "bf16") and not t.matches(MIXTRAL, 2, "bf16") and not t.matches(MIXTRAL, 1, "fp8")
    half = moe_tables(_typed(ROWS[:-1]))            # M = 64 lacks its down row: only M = 16 is a point
    assert half[0].m == (16.0,)


def test_interpolation_of_the_ratio() -> None:
    t = MoeTable(hidden=1, intermediate=1, experts=8, top_k=2, dtype="bf16", m=(16.0, 64.0), seconds=(2.0, 6.0))
    model = lambda m: np.asarray(m, float) * 0 + 1.0          # noqa: E731  a flat model: ratio 2 at 16, 6 at 64
    got = interpolate(t, [8, 16, 32, 64, 128], model)
    # 32 is halfway in log2 between 16 and 64: ratio 4; outside the rows, the model (1.0)
    assert got.tolist() == pytest.approx([1.0, 2.0, 4.0, 6.0, 1.0])


def _probe_with(rows) -> ProbeData:
    base = find_committed(H200)
    doc = copy.deepcopy(base.doc)
    # the shipped file's own MoE rows left out: only the hand-made ones price the experts here
    doc["step_ops"] = [r for r in doc.get("step_ops", []) if r.get("op") != "moe_grouped_gemm"] + rows
    return ProbeData("hand.json", doc)


def _moe_op(probe, m):
    params = params_from_probe(probe, None, "bf16", H200)
    sp = params.step
    return moe_op.cost(StepContext(MIXTRAL, 1, "bf16", np.asarray(m, float), H200.hbm_bytes_per_s,
                                   H200.dense_bf16_flop_per_s, sp))


def test_planner_prices_from_the_rows_inside_and_the_model_outside() -> None:
    plain = _moe_op(_probe_with([]), [4, 16, 32, 64, 256])
    hand = _moe_op(_probe_with(ROWS), [4, 16, 32, 64, 256])
    L = MIXTRAL.num_moe_layers
    assert hand.time_s[1] == pytest.approx(L * 450e-6) and hand.time_s[3] == pytest.approx(L * 600e-6)
    assert hand.time_s[0] == pytest.approx(plain.time_s[0]) and hand.time_s[4] == pytest.approx(plain.time_s[4])
    r16, r64 = hand.time_s[1] / plain.time_s[1], hand.time_s[3] / plain.time_s[3]
    assert hand.time_s[2] / plain.time_s[2] == pytest.approx((r16 + r64) / 2)
    assert np.array_equal(hand.bytes, plain.bytes) and "measured grouped-GEMM rows" in hand.source


def test_source_says_which_share() -> None:
    params = params_from_probe(_probe_with(ROWS), None, "bf16", H200)
    s = moe_op.source(MIXTRAL, 1, "bf16", [16, 32, 128], [1, 1, 2], params.step)
    assert s["measured_share"] == pytest.approx(0.5) and "16-64" in s["outside"]
    assert s["table"] == {"backend": "triton", "routing": "balanced", "dtype": "bf16", "m_min": 16.0, "m_max": 64.0}
    assert moe_op.source(MIXTRAL, 1, "bf16", [16, 64], [1, 1], params.step)["measured_share"] == 1.0
    assert moe_op.source(load_preset("llama-3-8b"), 1, "bf16", [16], [1], params.step) is None
    none = moe_op.source(MIXTRAL, 2, "bf16", [16], [1], params.step)
    assert none["measured_share"] == 0.0 and "probe --workload" in none["outside"]


def test_bad_rows_are_one_error_line() -> None:
    bad = copy.deepcopy(ROWS)
    del bad[1]["config"]["experts"]
    with pytest.raises(InputError, match="experts") as e:
        moe_tables(_typed(bad), "x.json")
    assert e.value.field == "step_ops[1]"
    bad = copy.deepcopy(ROWS)
    bad[0]["median_s"] = None                # an untimed row is skipped, as other rows are
    assert moe_tables(_typed(bad))[0].m == (64.0,)
    bad = copy.deepcopy(ROWS)
    bad[0]["config"]["proj"] = "up"
    with pytest.raises(InputError, match="gate_up or down"):
        moe_tables(_typed(bad))
    for field, value in (("median_s", -1.0), ("m", 0), ("experts", "8")):     # refused where the file is read
        bad = copy.deepcopy(ROWS)
        (bad[0] if field == "median_s" else bad[0]["config"])[field] = value
        with pytest.raises(InputError) as e:
            ProbeData("x.json", {"step_ops": bad}).step_ops
        assert e.value.field == f"step_ops[0].{'' if field == 'median_s' else 'config.'}{field}"


def test_estimate_json_carries_the_moe_source(tmp_path) -> None:
    cal = tmp_path / "cal.json"
    cal.write_text(json.dumps(_probe_with(_rows({16: (300e-6, 150e-6), 32: (350e-6, 170e-6)})).doc))
    wl = tmp_path / "mx.yaml"
    wl.write_text("schema_version: 1\nname: mx\nmodel: mixtral-8x7b\nhardware: h200\ntree:\n  tokens: 2048\n"
                  "  copies: 1\n  samples: 24\n  output_tokens: 64\n")
    res = CliRunner().invoke(app, ["estimate", str(wl), "--calibration", str(cal), "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert d["moe_source"]["measured_share"] == 1.0 and d["moe_source"]["table"]["m_max"] == 32.0
    dense = CliRunner().invoke(app, ["estimate", "rl-rollouts-64", "--hardware", "h200", "--calibration", str(cal),
                                     "--json"])
    assert dense.exit_code == 0 and "moe_source" not in json.loads(dense.stdout)


def test_merge_script_adds_rows_once_and_keeps_fitted() -> None:
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "merge_moe_rows.py"
    spec = importlib.util.spec_from_file_location("merge_moe_rows", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    cal = {"device": {"name": "NVIDIA H200"}, "step_ops": [{"op": "gemm", "config": {"m": 1}}],
           "fitted": {"x": 1}, "notes": {"runs": []}}
    rows = {"kind": "moe_probe_rows", "created_utc": "T1", "device": {"name": "NVIDIA H200"}, "shapes": [],
            "step_ops": ROWS, "skipped": [{"op": "moe_grouped_gemm", "config": {}, "reason": "time budget"}]}
    once = mod.merge(json.loads(json.dumps(rows)), copy.deepcopy(cal))
    twice = mod.merge({**json.loads(json.dumps(rows)), "created_utc": "T2"}, copy.deepcopy(once))
    moe = [r for r in twice["step_ops"] if r["op"] == "moe_grouped_gemm"]
    assert len(moe) == len(ROWS) and {r["run"] for r in moe} == {"T2"}    # re-measured points replaced
    assert twice["step_ops"][0]["op"] == "gemm" and twice["fitted"] == {"x": 1}
    assert [r["created_utc"] for r in twice["notes"]["runs"]] == ["T1", "T2"]
    with pytest.raises(SystemExit, match="H100"):
        mod.merge({**rows, "device": {"name": "NVIDIA H100"}}, copy.deepcopy(cal))
