"""What-if GPUs on measured kernels: the base GPU's calibration scaled to the user's peaks (bandwidth-bound
parts by the bandwidth ratio, compute-bound by the FLOP ratio, fixed costs kept), labelled; a what-if
equal to the profile changes no number."""

import json

import msgspec
import pytest
from typer.testing import CliRunner

from cascade_plan import estimate, load_scenario, select_params
from cascade_plan.cli.app import app
from cascade_plan.inputs.hardware_whatif import what_if

runner = CliRunner()


def _estimate_json(*args):
    res = runner.invoke(app, ["estimate", *map(str, args), "--json"])
    assert res.exit_code == 0, res.output
    return res.stdout


def _shipped(root):
    return sorted((root / "workloads").glob("*.yaml"))


@pytest.mark.parametrize("flag", ["--hbm-bandwidth", "--bf16-tflops", "--l2", "--memory"])
def test_a_what_if_equal_to_the_profile_changes_no_number(root, flag):
    """Every shipped workload: byte-identical JSON apart from the labels that say what-if."""
    field = {"--hbm-bandwidth": ("hbm_bytes_per_s", "B/s"), "--bf16-tflops": ("dense_bf16_flop_per_s", "flop/s"),
             "--l2": ("l2_bytes", "B"), "--memory": ("memory_bytes", "B")}[flag]
    for path in _shipped(root):
        hw = load_scenario(path).hardware
        value = f"{int(getattr(hw, field[0]))}{field[1]}"
        plain = json.loads(_estimate_json(path))
        wif = json.loads(_estimate_json(path, flag, value))
        wid = wif["hardware"]
        assert wid.startswith(f"{hw.id} (what-if, user-supplied: ")
        assert wif["calibration"]["mode"] == plain["calibration"]["mode"], path.name
        if plain["calibration"]["mode"] == "calibrated":
            assert wif["calibration"]["label"].startswith(f"what-if on measured kernels of {hw.id}")
        for doc in (plain, wif):
            doc["calibration"].pop("label"), doc["calibration"].pop("numbers")
        text = json.dumps(wif).replace(wid, hw.id).replace(wid.replace(hw.id, hw.name, 1), hw.name)
        assert text == json.dumps(plain), path.name


def test_the_issue_reproducer_keeps_its_calibration(root):
    """`--hbm-bandwidth 3.35` on the H100 gave 3.01x 'go' on default numbers; it is the calibrated 1.01x."""
    plain = json.loads(_estimate_json("rl-rollouts-64", "--hardware", "h100"))
    wif = json.loads(_estimate_json("rl-rollouts-64", "--hardware", "h100", "--hbm-bandwidth", "3.35"))
    assert wif["calibration"]["mode"] == "calibrated"
    assert wif["run"]["speedup"] == pytest.approx(plain["run"]["speedup"], rel=1e-12)
    assert wif["go_no_go"]["level"] == plain["go_no_go"]["level"] == "marginal"


def test_bandwidth_scales_the_bandwidth_bound_parts_and_keeps_fixed_costs(root):
    scn = load_scenario(root / "workloads/rl-rollouts-64.yaml")          # h100-sxm, AIConfigurator tables
    fast = msgspec.structs.replace(scn, hardware=what_if(scn.hardware, hbm_bandwidth="6.7"))   # 2x
    p0, p1 = select_params(scn), select_params(fast)
    assert p1.mode == "calibrated" and p1.decode == p0.decode and p1.prefix == p0.prefix   # same fractions of peak
    assert "HBM x2" in p1.label and p1.numbers.endswith("what-if")
    assert p1.step.glue.per_token_layer_s == pytest.approx(p0.step.glue.per_token_layer_s / 2)
    assert p1.step.glue.per_layer_s == p0.step.glue.per_layer_s                        # fixed cost kept
    e0, e1 = estimate(scn, p0), estimate(fast, p1)
    c0, c1 = e0.final_step.per_sequence, e1.final_step.per_sequence
    # bandwidth-bound decode attention at the final step: faster, but not below half the time (the
    # fixed costs and the L2 bound do not scale)
    assert c1.attention_s < c0.attention_s and c1.attention_s >= c0.attention_s / 2 - 1e-12
    assert e1.final_step.per_sequence.step_s < e0.final_step.per_sequence.step_s


def test_flop_rate_scales_the_compute_bound_prefix_pass(root):
    scn = load_scenario(root / "workloads/rl-rollouts-64.yaml")
    slow = msgspec.structs.replace(scn, hardware=what_if(scn.hardware, bf16_tflops="100"))
    p = select_params(slow)
    assert p.mode == "calibrated" and "bf16 x" in p.label
    assert (estimate(slow, p).steps[0].cascade.attention_s
            > estimate(scn, select_params(scn)).steps[0].cascade.attention_s)
