"""The whole step in the planner: StepParts fitted from op rows by hand-checkable arithmetic, a step is
attention + GEMMs + glue + all-reduce, ideal mode keeps the seed's arithmetic, and the committed H200
calibration predicts the measured whole steps within the targets (step median <= 4%, worst <= 10%)."""

import json
import math

import msgspec
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from cascade_plan import DEFAULT, IDEAL, load_hardware
from cascade_plan.calibration.calibration_file import find_committed
from cascade_plan.calibration.probe_params import params_from_probe, step_parts_of
from cascade_plan.calibration.step_fit import (
    fit_allreduce,
    fit_gemm,
    fit_glue,
    gemm_roofline_s,
)
from cascade_plan.calibration.step_parts_doc import read_step_parts, step_parts_json
from cascade_plan.calibration_schema.device import Ceilings
from cascade_plan.calibration_schema.steps import StepOpRow
from cascade_plan.cli.app import app
from cascade_plan.cost.cost_model import gpu_shape, single_level_load, step_costs
from cascade_plan.cost.step_defaults import DEFAULT_STEP_PARTS
from cascade_plan.cost.step_terms import layer_gemms
from cascade_plan.inputs.model_spec import load_preset

runner = CliRunner()
H200 = load_hardware("h200")
CEIL = Ceilings(hbm_read_bytes_per_s=4.8e12, bf16_matmul_flop_per_s=9.9e14, graph_single_kernel_s=4e-6,
               graph_kernel_launch_s=1e-6)


def _typed(rows: list[dict]) -> list[StepOpRow]:
    return msgspec.convert(rows, list[StepOpRow])


def test_llama_3_8b_gemm_shapes_by_hand():
    g = {name: (n, k, c) for name, n, k, c in layer_gemms(load_preset("llama-3-8b"), 2)}
    assert g["qkv"] == ((16 + 2 * 4) * 128, 4096, 32)      # 16 query + 4 KV heads per GPU at TP 2
    assert g["o"] == (4096, 2048, 32) and g["gate_up"] == (14336, 4096, 32) and g["down"] == (4096, 7168, 32)
    assert g["lm_head"] == (64128, 4096, 1)


def test_gemm_fit_recovers_a_known_ratio_table():
    rows = []
    for m in (1, 16, 128, 1024):
        for n, k in ((4096, 4096), (28672, 4096)):
            roof = float(gemm_roofline_s(m, n, k, 2, H200.hbm_bytes_per_s, H200.dense_bf16_flop_per_s))
            ratio = 1.5 if m == 128 else 1.2
            rows.append({"op": "gemm", "config": {"m": m, "n": n, "k": k, "dtype": "bf16"},
                         "median_s": roof * ratio + 1e-6})
    e = fit_gemm(_typed(rows), "bf16", H200, CEIL)
    assert e.overhead_s == 1e-6
    assert np.allclose(e.ratio_at(128, 4096 * 4096 * 2), 1.5) and np.allclose(e.ratio_at(16, 28672 * 4096 * 2), 1.2)
    assert np.allclose(e.ratio_at(4096, 1e12), 1.2)     # clamped at the table's edges


def test_glue_and_allreduce_fits_by_hand():
    rows = [{"op": op, "config": {"model": "llama-3-8b", "tp": 1, "variant": "fused", "m": m},
             "median_s": a + b * m} for op, a, b in (("glue_layer", 20e-6, 4e-8), ("glue_step", 40e-6, 1e-7))
            for m in (1, 64, 1024)]
    g = fit_glue(_typed(rows), "fused", CEIL)
    assert g.per_layer_s == pytest.approx(20e-6) and g.per_token_layer_s == pytest.approx(4e-8)
    # 32 layers at 128 tokens: 32 x (20 + 5.12) us + 40 + 12.8 us
    assert float(g.time_s(128, 32)) == pytest.approx(32 * 25.12e-6 + 52.8e-6)
    ar = [{"op": "allreduce", "config": {"gpus": 2, "bytes": b}, "median_s": 10e-6 + b / 250e9}
          for b in (8192, 1 << 20, 1 << 26)]
    fits = fit_allreduce(_typed(ar), "h200")
    assert fits[2].latency_s == pytest.approx(10e-6) and fits[2].bytes_per_s == pytest.approx(250e9)
    # 8 GPUs, extrapolated: bus bandwidth 250 GB/s kept, ring traffic 2 x 7 / 8; latency x log2(8)
    assert fits[8].origin == "extrapolated" and "NVLink" in fits[8].basis
    assert fits[8].bytes_per_s == pytest.approx(250e9 / 1.75) and fits[8].latency_s == pytest.approx(30e-6)


def _costs(params, model="llama-3-8b", tp=1, batch=128):
    m = load_preset(model)
    g = gpu_shape(m, H200, "bf16", "bf16", tp)
    return step_costs(single_level_load(4096, batch, 1, 1), g, m, "bf16", tp, params)


def test_a_step_is_the_sum_of_its_parts_and_ideal_keeps_the_seed():
    c = _costs(DEFAULT, tp=2)
    assert np.allclose(c.ps_step_s, c.ps_attention_s + c.weight_s + c.glue_s + c.comm_s)
    assert np.allclose(c.cas_step_s, c.cas_attention_s + c.weight_s + c.glue_s + c.comm_s)
    # 2 all-reduces per layer of 128 tokens x 4096 x 2 B = 1 MiB over 2 GPUs, a point of the measured
    # NCCL curve (16.9 us; the old line, 10 us + 1 MiB / 242 GB/s, said 14.3 us): 64 x 16.9 us
    assert float(c.comm_s) == pytest.approx(64 * 16.9e-6)
    i = _costs(IDEAL, tp=2)
    assert IDEAL.step is None and float(i.glue_s) == 0 and float(i.comm_s) == 0
    assert np.allclose(i.ps_step_s, i.ps_attention_s + i.weight_s)
    # the rest of the step is not the bare roofline: the GEMMs take >= 1.1x their weight bytes / bandwidth
    gemm_bytes = sum(cnt * n * k * 2.0 for _, n, k, cnt in layer_gemms(load_preset("llama-3-8b"), 2))
    assert float(c.weight_s) > 1.1 * gemm_bytes / H200.hbm_bytes_per_s


def test_default_step_parts_round_trip_through_json():
    doc = json.loads(json.dumps(step_parts_json(DEFAULT_STEP_PARTS)))
    back = read_step_parts(doc)
    assert back.allreduce[8].origin == "extrapolated" and back.glue == DEFAULT_STEP_PARTS.glue
    assert np.allclose(back.gemm["bf16"].ratio, DEFAULT_STEP_PARTS.gemm["bf16"].ratio)


def test_estimate_json_breaks_the_step_down(root):
    res = runner.invoke(app, ["estimate", str(root / "workloads/rl-rollouts-64.yaml"), "--hardware", "h200",
                              "--tp", "2", "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    for mode in ("per_sequence", "cascade"):
        b = d["first_step"][mode]["breakdown"]
        assert sum(b.values()) == pytest.approx(d["first_step"][mode]["step_s"], rel=1e-9)
        assert b["comm_s"] > 0 and b["glue_s"] > 0 and b["gemm_s"] > 0
    assert d["step_parts"]["source"].startswith("probe:") and d["step_parts"]["allreduce"]["origin"] == "measured"
    assert set(d["run"]["breakdown"]["cascade"]) == {"attention_s", "gemm_s", "glue_s", "comm_s"}


def test_committed_calibration_predicts_whole_steps_within_the_targets():
    """Whole model-shaped steps measured on the H200 (never fitted). Held-out shapes: Mistral-7B, Qwen2.5-7B
    and three models from config.json files (CodeLlama-13B MHA at 8 sequences, Qwen2.5-14B groups of 5 with
    fp8 KV at 512 sequences, Mistral-Nemo-12B at a 32K prefix with bf16 and with fp8 KV + fp8 weights);
    GEMMs fitted on Llama-3-8B only; TP 2 steps included. The whole-step targets (step median <= 4%, worst
    <= 10%, speedup median <= 4%) hold for each backend and KV dtype. Triton with fp8 KV missed its speedup
    median (4.7%) until the fp8 weights' activation quantisation was priced (test_fp8_layer_composition.py).
    The worst fp8 step is the 512-sequence Qwen2.5-14B cascade, 7-9% too fast at its first step: GEMM-bound at
    M = 512, it runs at the H200's 700 W power limit (SM clock 1,755-1,920 MHz) where its per-sequence twin and
    the isolated rows do not (benchmarks/raw/h200-2026-12-01c, docs/probe-notes.md)."""
    from cascade_plan.calibration.step_validation import validate_steps

    probe = find_committed(H200)
    assert probe.doc["steps"] and probe.fitted["step_parts"]["allreduce"]["2"]["origin"] == "measured"
    res = validate_steps(probe, H200)
    assert {p["model"] for p in res["points"] if p["held_out_shape"] and not p["regimes"]} == {
        "mistral-7b", "qwen2.5-7b", "codellama-13b", "qwen2.5-14b", "mistral-nemo-12b"}
    # the regimes' held-out steps (small models at 512-1,024 sequences, head dims 64 and 256, groups of 6, a 128K
    # prefix, a 4K suffix) are summarised on their own, against their own targets
    assert {p["model"] for p in res["points"] if p["regimes"]} == {
        "qwen2.5-0.5b", "qwen2.5-1.5b", "gemma-2-2b", "llama-3.1-8b", "qwen2.5-14b"}
    assert set(res["regimes"]) == {f"{b}/{kv}" for b in ("flashinfer", "flashinfer-fa2", "triton")
                                   for kv in ("bf16", "fp8")}
    assert {p["tp"] for p in res["points"]} == {1, 2}
    assert {(p["kv_dtype"], p["weight_dtype"]) for p in res["points"]} == {("bf16", "bf16"), ("fp8", "bf16"),
                                                                          ("fp8", "fp8")}
    # Triton's fp8-KV steps of probe 1.1's kernels (rl-rollouts-64: bf16 dots over fp8) are out of the file
    # (benchmarks/drop_superseded_triton_rows.py): its fp8 steps are the 12 its probe 1.3 kernels ran
    for b, n in (("flashinfer", 54), ("flashinfer-fa2", 54), ("triton", 48)):
        s = res["summary"][b]
        assert s["step"]["n"] == n, b
        assert s["step"]["median"] <= 0.04 and s["speedup"]["median"] <= 0.04, (b, s)
        for kv in ("bf16", "fp8"):
            d = res["summary"][f"{b}/{kv}"]
            assert d["step"]["median"] <= 0.04 and d["step"]["max"] <= 0.10 and d["targets_met"], (b, kv, d)
    # The probe 1.3 Triton decode over fp8 KV runs a batch that fills the GPU alone (sequences x KV heads >= 4 per
    # SM) unsplit in 128-token tiles, 1.36x faster than its roofline elsewhere (the fit's batch-filled launch,
    # cost/roofline.py filled_gain). Without it the fit priced Qwen2.5-14B's 512-sequence per-sequence steps
    # 14-17% too slow; with it, 3.4-3.5%.
    g5 = [p for p in res["points"] if p["workload"] == "heldout-g5-512-fp8kv" and p["backend"] == "triton"]
    assert len(g5) == 3 and all(0.0 < p["per_sequence_error"] < 0.05 for p in g5), g5
    assert len(res["run_speedups"]) == 47


def test_calibrated_params_carry_the_fitted_step_parts():
    probe = find_committed(H200)
    p = params_from_probe(probe, "flashinfer", "bf16", H200, load_preset("llama-3-8b"))
    assert p.step is not None and p.step.source == "probe:h200-probe-2026-12-01.json"
    assert set(p.step.gemm) == {"bf16", "fp8"} and p.step.glue.variant == "fused"
    # measured beats extrapolated
    assert math.isclose(p.step.allreduce_for(8).gpus, 8) and p.step.allreduce_for(8).origin == "aic"
    assert p.step.allreduce_for(2).origin == "measured"


@pytest.mark.slow
@pytest.mark.xdist_group("validate")        # conftest.py: one `validate --json --plots` for the tests that read it
def test_validate_command_reports_the_steps(h200_validate_command):
    steps = h200_validate_command[0]["steps"]
    assert len(steps["points"]) == 120 and {r["workload"] for r in steps["run_speedups"]} >= {
        "rl-rollouts-64", "parallel-sampling-n8", "long-prefix-qwen", "heldout-mha-8", "heldout-g5-512-fp8kv",
        "heldout-32k-fp8", "heldout-32k-bf16"}
    for p in steps["points"]:
        parts = p["predicted_parts"]
        assert p["predicted_cascade_s"] == pytest.approx(parts["cascade_attention_s"] + parts["gemm_s"]
                                                         + parts["glue_s"] + parts["comm_s"])
    # the table's steps section ("Whole decode steps", "Step targets"): tests/help_example_outputs.py checks it
    # on the help's `validate h200-probe-2026-12-01.json`, the same command on the same file


def test_the_step_is_the_sum_of_its_op_modules_keyed_by_name():
    from cascade_plan.cost.step_terms import step_ops, step_terms

    for model, tp in (("llama-3-8b", 1), ("llama-3-70b", 8), ("mixtral-8x7b", 2), ("deepseek-v3", 8)):
        m = load_preset(model)
        tokens = np.array([1.0, 64.0, 512.0])
        ops = step_ops(m, tp, "bf16", tokens, DEFAULT_STEP_PARTS, H200.hbm_bytes_per_s, H200.dense_bf16_flop_per_s)
        terms = step_terms(m, tp, "bf16", tokens, DEFAULT_STEP_PARTS, H200.hbm_bytes_per_s, H200.dense_bf16_flop_per_s)
        assert set(ops) >= {"gemm", "lm_head", "glue", "allreduce"} and ("moe" in ops) == bool(m.num_experts)
        assert all(o.name == k for k, o in ops.items())
        assert np.allclose(sum(o.time_s for o in ops.values()), terms.gemm_s + terms.glue_s + terms.comm_s)
        # each op: bytes and FLOPs of its own; time no faster than its bytes at the datasheet bandwidth
        for o in (ops["gemm"], ops["lm_head"]):
            assert np.all(o.time_s >= o.bytes / H200.hbm_bytes_per_s) and np.all(np.diff(o.flops) > 0)
        assert np.all((ops["allreduce"].time_s > 0) == (tp > 1))
        # lm_head by hand: vocab / TP x hidden x 2 B of weights once per step
        assert ops["lm_head"].bytes[0] == pytest.approx(m.vocab_size / tp * m.hidden_size * 2
                                                        + (m.vocab_size / tp + m.hidden_size) * 2)


def test_every_shipped_step_parts_section_round_trips_through_the_typed_form_unchanged(root):
    """The typed form (calibration_schema.step_parts.StepPartsDoc) reads and writes what the files hold, key order
    included."""
    for path in sorted((root / "calibrations").glob("*.json")):
        sp = json.loads(path.read_text())["fitted"]["step_parts"]
        assert json.dumps(step_parts_json(read_step_parts(sp))) == json.dumps(sp), path.name


def test_a_step_timed_with_torch_glue_is_priced_with_torch_glue():
    """A probe run without FlashInfer times its steps with plain torch glue (Qwen3's fp8 `probe --workload` run in
    benchmarks/raw/h200-2026-12-01b: priced with the file's fused glue its steps came out 9-15% too fast, with
    torch glue within 4%). Validation prices each step with the glue it ran, fitted from the file's glue rows."""
    from cascade_plan.calibration.calibration_file import ProbeData
    from cascade_plan.calibration.step_validation import step_points

    probe = find_committed(H200)
    rows = [s for s in probe.doc["steps"] if s["workload"] == "rl-rollouts-64" and s["tp"] == 1
            and s["kv_dtype"] == "bf16" and s["position"] == "first" and s["backend"] in ("triton",)]
    assert len(rows) == 2 and {s["glue"] for s in rows} == {"fused"}
    fused, torch_glue = ({**probe.doc, "steps": [{**s, "glue": g} for s in rows]} for g in ("fused", "torch"))
    a, = step_points(ProbeData(probe.path, fused), H200)
    b, = step_points(ProbeData(probe.path, torch_glue), H200)
    # torch glue: ~94 us per layer at M = 1 against FlashInfer's ~16 us (glue rows of the file), 32 layers
    extra = b.predicted_ps_s - a.predicted_ps_s
    assert 1.5e-3 < extra < 4e-3 and b.predicted_cas_s - a.predicted_cas_s == pytest.approx(extra, rel=1e-6)
    assert b.predicted_parts["glue_s"] - a.predicted_parts["glue_s"] == pytest.approx(extra, rel=1e-6)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0.5, 1e5), min_size=1, max_size=6), st.floats(1e5, 1e12))
def test_one_gemms_ratio_reads_only_its_two_columns_and_agrees_with_the_whole_table(ms, weight_bytes):
    """A GEMM's weight size is one number: the table is read at its two bracketing columns only, and gives what
    interpolating every column at that size gives (the path taken for arrays of weight sizes)."""
    e = next(iter(step_parts_of(find_committed(H200, "probe")).gemm.values()))
    m = np.array(ms)
    assert np.array_equal(e.ratio_at(m, weight_bytes), e.ratio_at(m, np.full(m.shape, weight_bytes)))
