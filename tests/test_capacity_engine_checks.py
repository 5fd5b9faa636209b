"""KV capacity by hand, vLLM's gate on workloads, and the check command's exit codes and files."""

import json
import textwrap
import xml.etree.ElementTree as ET

import pytest
from typer.testing import CliRunner

from cascade_plan import DEFAULT, Scenario, TreeNode, capacity, estimate, load_hardware, load_scenario, simple_tree
from cascade_plan.cli.app import app
from cascade_plan.cost.capacity import preemption_warnings
from cascade_plan.engine.engine_gate import common_prefix_of_all, engine_view
from cascade_plan.inputs.model_spec import load_preset

runner = CliRunner()


def scn(tree, model="llama-3-8b", hw="h100-sxm", tp=1):
    return Scenario(name="t", model=load_preset(model), hardware=load_hardware(hw), kv_dtype="bf16",
                    weight_dtype="bf16", tp=tp, prefix_caching=True, block_size=16, tree=tree)


def test_capacity_by_hand():
    c = capacity(scn(simple_tree(4096, 2, 64, 1024)))
    budget = 80 * 2**30 - 8_030_261_248 * 2 - 0.1 * 80 * 2**30       # memory - weights - 10% reserve
    assert c.kv_budget_bytes == pytest.approx(budget)
    assert c.kv_bytes_shared == (2 * 4096 + 128 * 1024) * 131072       # prefixes once + every suffix: 17 GiB
    assert c.kv_bytes_unshared == 128 * 5120 * 131072                  # 80 GiB
    assert c.max_sequences_shared == int(budget // ((2 * 4096 + 128 * 1024) * 131072 / 128)) == 429
    assert c.max_sequences_unshared == int(budget // (5120 * 131072)) == 91
    assert c.group_sequences == 64 and c.group_kv_bytes == (4096 + 64 * 1024) * 131072
    assert c.fits_shared and not c.fits_unshared and preemption_warnings(c, True) == []


def test_group_that_does_not_fit_warns_of_preemption():
    c = capacity(scn(simple_tree(32768, 1, 256, 4096), model="llama-3-70b", tp=2))
    assert not c.group_fits
    (w,) = preemption_warnings(c, True)
    assert "preempt siblings" in w and "256 sequences" in w


def test_common_prefix_of_all():
    assert common_prefix_of_all(simple_tree(4096, 2, 64, 10)) == 0
    assert common_prefix_of_all(simple_tree(4096, 1, 64, 10)) == 4096
    tree = TreeNode(tokens=2000, children=[TreeNode(tokens=500, children=[TreeNode(tokens=60, copies=4, samples=2,
                                                                                   output_tokens=5)])])
    assert common_prefix_of_all(tree) == 2500


@pytest.mark.parametrize(("prefix", "samples", "used"), [
    (4096, 64, True), (256, 64, True), (255, 64, False),   # 256-token minimum, whole blocks
    (4096, 8, False), (4096, 17, True),                    # 8 requests minimum, then the tile/wave comparison
    (4096, 7, False),
])
def test_vllm_gate_on_workloads(prefix, samples, used):
    est = estimate(scn(simple_tree(prefix, 1, samples, 128)), DEFAULT)
    v = engine_view(est)
    assert v.opted_in.used is used
    assert v.shipped.used is False                         # disabled by default in recent vLLM


def test_two_prompts_in_a_batch_mean_no_vllm_cascade_and_a_disagreement(root):
    est = estimate(load_scenario(root / "workloads/rl-rollouts-64.yaml"), DEFAULT)
    v = engine_view(est)
    assert v.common_prefix_tokens == 0 and not v.opted_in.used and not v.agrees
    assert v.finding.startswith("Disagreement")


def test_multi_level_tree_gets_a_one_level_engine_cascade(root):
    est = estimate(load_scenario(root / "workloads/system-prompt-document-samples.yaml"), DEFAULT)
    v = engine_view(est)
    assert v.opted_in.used and v.common_prefix_tokens == 2000
    assert 1.0 < v.engine_speedup < v.multi_level_speedup / 2


# ---- check command ------------------------------------------------------------------------------

def test_check_pass_and_fail_exit_codes(root, tmp_path):
    wl = root / "workloads/rl-rollouts-64.yaml"
    # default efficiencies: the thresholds below were set against them (h100-sxm is calibrated from AIConfigurator)
    ok = runner.invoke(app, ["check", str(wl), "--uncalibrated", "--min-run-speedup", "2", "--min-sequences-fit", "128",
                             "--cascade-chosen", "--junit", str(tmp_path / "j.xml"),
                             "--markdown", str(tmp_path / "s.md")])
    assert ok.exit_code == 0, ok.output
    assert "PASS  rl-rollouts-64  min_run_speedup: 3.01x >= 2.00x" in ok.stdout
    suites = ET.parse(tmp_path / "j.xml").getroot()
    assert suites.get("tests") == "5" and suites.get("failures") == "0"     # 3 options + 2 from its `checks:`
    assert ("| rl-rollouts-64 | `min_sequences_fit` | ✅ pass | 429 sequences >= 128 |"
            in (tmp_path / "s.md").read_text())

    bad = runner.invoke(app, ["check", str(wl), "--uncalibrated", "--min-run-speedup", "5", "--max-step-s", "0.001",
                              "--vllm-uses-cascade", "--junit", str(tmp_path / "f.xml")])
    assert bad.exit_code == 1
    assert "FAIL  rl-rollouts-64  min_run_speedup: 3.01x < 5.00x (required: >= 5.00x)" in bad.stdout
    root_el = ET.parse(tmp_path / "f.xml").getroot()
    assert root_el.get("failures") == "3"
    assert root_el.find(".//failure") is not None


def test_check_reads_the_workload_checks_section(tmp_path, root):
    shipped = (root / "workloads/rl-rollouts-64.yaml").read_text()
    shipped = shipped.split("\nchecks:")[0] + "\n"                  # replace its own checks (no duplicate key)
    text = shipped + textwrap.dedent("""\
        checks:
          min_run_speedup: 3.0
          max_step_s: 0.05
          min_sequences_fit: 400
        """)
    wl = tmp_path / "w.yaml"
    wl.write_text(text)
    res = runner.invoke(app, ["check", str(wl), "--json", "--uncalibrated"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["passed"] and [c["name"] for c in doc["workloads"]["w"]] == ["min_run_speedup", "max_step_s",
                                                                             "min_sequences_fit"]
    # options win
    assert runner.invoke(app, ["check", str(wl), "--uncalibrated", "--min-sequences-fit", "1000"]).exit_code == 1


def test_check_bad_input_exit_2_and_writes_nothing(tmp_path, root):
    wl = tmp_path / "w.yaml"
    wl.write_text("schema_version: 1\nmodel: llama-3-8b\ntree: {tokens: 5, samples: 0, output_tokens: 3}\n")
    res = runner.invoke(app, ["check", str(wl), "--min-run-speedup", "1", "--junit", str(tmp_path / "j.xml")])
    assert res.exit_code == 2 and "tree.samples" in res.stderr
    assert not (tmp_path / "j.xml").exists()
    none = runner.invoke(app, ["check", str(root / "workloads/beam-search.yaml")])
    assert none.exit_code == 2 and "nothing to check" in none.stderr
    unknown = tmp_path / "u.yaml"
    unknown.write_text((root / "workloads/beam-search.yaml").read_text() + "checks:\n  min_speedup: 2\n")
    res = runner.invoke(app, ["check", str(unknown)])
    assert res.exit_code == 2 and "checks.min_speedup: unknown field" in res.stderr


def test_compare_rows(root):
    res = runner.invoke(app, ["compare", str(root / "workloads/rl-rollouts-64.yaml"), "--hardware", "h100-sxm,h200",
                              "--kv-dtype", "bf16,fp8", "--json"])
    rows = json.loads(res.stdout)["rows"]
    assert [(r["hardware"], r["kv_dtype"]) for r in rows] == [("h100-sxm", "bf16"), ("h100-sxm", "fp8"),
                                                              ("h200", "bf16"), ("h200", "fp8")]
    assert rows[1]["kv_bytes_per_token"] == 65536
    csv = runner.invoke(app, ["compare", str(root / "workloads/rl-rollouts-64.yaml"), "--hardware", "h200", "--csv"])
    assert csv.stdout.startswith("hardware,kv_dtype,")
    assert runner.invoke(app, ["compare", str(root / "workloads/rl-rollouts-64.yaml"),
                               "--kv-dtype", "fp9"]).exit_code == 2
