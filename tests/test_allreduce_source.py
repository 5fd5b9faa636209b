"""All-reduce: measured data over extrapolated. The H200 probe measured NCCL on 2 GPUs and
modelled 4 and 8; AIConfigurator's H200 tables measured vLLM's custom all-reduce on 4 and 8, so those
counts come from there, labelled with origin and algorithm; 2 GPUs keep the probe's NCCL figure."""

import json
import types

from typer.testing import CliRunner

from cascade_plan.calibration.allreduce_source import prefer_measured_allreduce
from cascade_plan.calibration.calibration_file import find_committed
from cascade_plan.calibration.probe_params import params_from_probe, step_parts_of
from cascade_plan.calibration.step_parts_doc import read_step_parts, step_parts_json
from cascade_plan.cli.app import app
from cascade_plan.cost.step_parts import infer_algorithm
from cascade_plan.inputs.hardware import load_hardware
from cascade_plan.inputs.model_spec import load_preset

H200 = load_hardware("h200")
runner = CliRunner()


def _aic_h200_allreduce():
    return json.loads(open(find_committed(H200, "aic").path).read())["fitted"]["step_parts"]["allreduce"]


def test_probe_params_take_aics_measured_4_and_8_gpu_allreduce_and_keep_their_own_2_gpu_nccl():
    probe = find_committed(H200, "probe")
    own = step_parts_of(probe).allreduce
    assert own[4].origin == own[8].origin == "extrapolated" and own[2].origin == "measured"
    step = params_from_probe(probe, None, "bf16", H200, load_preset("llama-3-8b")).step
    aic = _aic_h200_allreduce()
    for n in (4, 8):
        ar = step.allreduce_for(n)
        assert ar.origin == "aic" and ar.bytes_per_s == aic[str(n)]["bytes_per_s"]
        assert ar.latency_s == aic[str(n)]["latency_s"]
        assert ar.algorithm == "vLLM custom all-reduce (not NCCL)" and "h200-aic-vllm.json" in ar.basis
    two = step.allreduce_for(2)
    assert two.origin == "measured" and two.algorithm == "NCCL" and two.bytes_per_s == own[2].bytes_per_s
    assert any("instead of the probe's extrapolation" in n for n in step.notes)


def test_no_aic_file_for_the_gpu_keeps_the_extrapolation():
    step = step_parts_of(find_committed(H200, "probe"))
    same = prefer_measured_allreduce(step, types.SimpleNamespace(id="no-such-gpu"))
    assert same is step and same.allreduce[8].origin == "extrapolated"
    assert "modelled" in same.allreduce[8].label and "extrapolated" in same.allreduce[8].label


def test_algorithm_is_named_for_every_source_and_survives_json():
    assert (infer_algorithm("aic", "x/comm/sglang/0.5/custom_allreduce_perf.parquet")
            == "SGLang custom all-reduce (not NCCL)")
    assert infer_algorithm("aic", "x/comm/nccl/2.21/nccl_perf.parquet (NCCL all_reduce, half)") == "NCCL"
    assert infer_algorithm("extrapolated", "from the measured 2-GPU fit") == "NCCL (modelled)"
    step = params_from_probe(find_committed(H200, "probe"), None, "bf16", H200, load_preset("llama-3-8b")).step
    back = read_step_parts(step_parts_json(step))
    assert {n: a.algorithm for n, a in back.allreduce.items()} == {n: a.algorithm for n, a in step.allreduce.items()}


def test_estimate_names_the_allreduce_origin_and_algorithm(root):
    wl = str(root / "workloads" / "rl-rollouts-64.yaml")
    for tp, origin, words in ((2, "measured", "NCCL, measured by the probe"),
                              (8, "aic", "vLLM custom all-reduce (not NCCL), measured by AIConfigurator")):
        r = runner.invoke(app, ["estimate", wl, "--hardware", "h200", "--tp", str(tp), "--json"])
        assert r.exit_code == 0, r.output
        ar = json.loads(r.output)["step_parts"]["allreduce"]
        assert ar["origin"] == origin and words in ar["label"]
        text = runner.invoke(app, ["estimate", wl, "--hardware", "h200", "--tp", str(tp)]).output
        assert words in " ".join(text.split())
