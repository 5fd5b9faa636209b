"""The seed's worked example, reproduced exactly in ideal mode (the founding document's arithmetic)."""

import json

import pytest
from typer.testing import CliRunner

from cascade_plan.cli.app import app

KiB, MiB, GiB = 1024, 1024**2, 1024**3


@pytest.fixture(scope="module")
def seed(request):
    root = request.config.rootpath
    res = CliRunner().invoke(app, ["estimate", str(root / "workloads/rl-rollouts-64.yaml"), "--ideal",
                                   "--hardware", "h100-sxm", "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_kv_bytes_per_token_is_128_kib(seed):
    assert seed["kv_bytes_per_token"] == 131_072 == 128 * KiB


def test_prefix_is_512_mib(seed):
    assert [n["kv_bytes"] for n in seed["prefix_nodes"]] == [512 * MiB]
    assert seed["prefix_nodes"][0]["instances"] == 2


def test_weights_about_16_gb_and_4_8_ms(seed):
    assert seed["weight_bytes"] == pytest.approx(16e9, rel=0.01)
    assert seed["weight_s"] == pytest.approx(4.8e-3, rel=0.01)


def test_final_step_per_sequence_80_gib_25_6_ms(seed):
    ps = seed["final_step"]["per_sequence"]
    assert ps["attention_bytes"] == 128 * 5120 * 128 * KiB == 80 * GiB
    assert ps["attention_s"] == pytest.approx(25.6e-3, rel=0.01)
    assert ps["step_s"] == pytest.approx(30e-3, rel=0.03)


def test_final_step_cascade_17_gib_5_4_ms(seed):
    cas = seed["final_step"]["cascade"]
    assert cas["prefix_bytes"] == 1 * GiB
    assert cas["suffix_bytes"] == 128 * 1024 * 128 * KiB == 16 * GiB
    assert cas["merge_bytes"] == 0           # the seed's arithmetic counts no merge traffic
    assert cas["attention_bytes"] == 17 * GiB
    assert cas["attention_s"] == pytest.approx(5.4e-3, rel=0.03)
    assert cas["step_s"] == pytest.approx(10e-3, rel=0.04)


def test_run_gain_is_3_to_4x_and_early_steps_gain_most(seed):
    assert 3.0 <= seed["run"]["speedup"] <= 4.0
    assert seed["first_step"]["speedup"] > seed["middle_step"]["speedup"] > seed["final_step"]["speedup"]
    assert seed["run"]["per_sequence_s"] / seed["run"]["cascade_s"] == pytest.approx(seed["run"]["speedup"])


def test_default_mode_adds_merge_traffic(request):
    root = request.config.rootpath
    res = CliRunner().invoke(app, ["estimate", str(root / "workloads/rl-rollouts-64.yaml"), "--json"])
    cas = json.loads(res.stdout)["final_step"]["cascade"]
    # 128 seqs x 3 fp32 states (read two, write one) x 32 heads x (128 + 1 LSE) x 4 B x 32 layers
    assert cas["merge_bytes"] == 128 * 3 * 32 * 129 * 4 * 32
    assert cas["attention_bytes"] == 17 * GiB + cas["merge_bytes"]


def test_go_no_go_says_go(seed):
    # redundant prefix reads at step 1: (128 - 2) x 512 MiB = 63 GiB, about 4.2x the 16 GB of weights
    assert seed["go_no_go"]["redundant_prefix_bytes"] == 126 * 512 * MiB
    assert seed["go_no_go"]["level"] == "go"


def test_quick_flags_equal_the_workload_file(seed):
    res = CliRunner().invoke(app, ["estimate", "--model", "llama-3-8b", "--hardware", "h100-sxm", "--prefix", "4096",
                                   "--groups", "2", "--samples", "64", "--output-tokens", "1024", "--ideal", "--json"])
    assert res.exit_code == 0, res.output
    quick = json.loads(res.stdout)
    assert quick["run"] == seed["run"]
    assert quick["final_step"] == seed["final_step"]
