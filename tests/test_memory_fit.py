"""Memory everywhere: a configuration whose weights or batch do not fit gets no go/no-go, says why and
what would fit; sweeps and breakevens mark the points that do not fit."""

import json
import re

import msgspec
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from cascade_plan import DEFAULT, IDEAL, Scenario, estimate, load_hardware, load_scenario, simple_tree
from cascade_plan.cli.app import app
from cascade_plan.cost.breakeven import sweep
from cascade_plan.cost.memory_fit import memory_fit, single_level_fits
from cascade_plan.inputs.model_spec import load_preset

runner = CliRunner()
GiB = 2**30


def scn(tree, model="llama-3-8b", hw="h100-sxm", tp=1, weight_dtype="bf16", kv_dtype="bf16"):
    return Scenario(name="t", model=load_preset(model), hardware=load_hardware(hw), kv_dtype=kv_dtype,
                    weight_dtype=weight_dtype, tp=tp, prefix_caching=True, block_size=16, tree=tree)


def _applied(s: Scenario, suggestion: str) -> Scenario:
    """The scenario a 'what would fit' suggestion describes (its command-line flag)."""
    m = re.search(r"--(tp|weight-dtype|kv-dtype) (\w+)", suggestion)
    key = {"tp": "tp", "weight-dtype": "weight_dtype", "kv-dtype": "kv_dtype"}[m.group(1)]
    return msgspec.structs.replace(s, **{key: int(m.group(2)) if key == "tp" else m.group(2)})


def test_deepseek_v3_tp8_on_a100_40gb_gets_no_verdict(root):
    s = load_scenario(root / "workloads/deepseek-v3-grpo-tp8.yaml", "a100-40gb")
    est = estimate(s, DEFAULT)
    assert est.memory.weights_fit is False and est.memory.fits is False
    # 671B parameters in fp8 over 8 GPUs: 83.9 GB per GPU against 40 GiB less 10%
    assert est.memory.weight_bytes == pytest.approx(s.model.total_params / 8)
    assert est.verdict.level == "does-not-fit" and not est.verdict.judged
    assert est.verdict.text.startswith("Does not fit: the weights alone do not fit")
    assert "Go" not in est.verdict.text
    assert est.memory.would_fit, "says what would fit"
    for suggestion in est.memory.would_fit:
        assert memory_fit(_applied(s, suggestion)).weights_fit, suggestion


def test_every_suggestion_fits_or_names_the_batch_that_does():
    cases = [scn(simple_tree(8000, 1, 16, 512), model="llama-3-70b"),                      # weights: 141 GB on 80 GiB
             scn(simple_tree(30000, 4, 64, 2048), hw="a100-40gb"),                         # batch too big
             scn(simple_tree(4096, 2, 64, 1024), hw="rtx-4090")]
    for s in cases:
        m = memory_fit(s)
        assert not m.fits and m.reason and m.would_fit
        for suggestion in m.would_fit:
            if "--" not in suggestion:
                continue
            after = memory_fit(_applied(s, suggestion))
            if "at most" in suggestion:      # weights fit there; the batch that fits is named
                n = int(re.search(r"at most ([\d,]+) of", suggestion).group(1).replace(",", ""))
                assert after.weights_fit and after.max_sequences == n
            else:
                assert after.fits, suggestion


def test_batch_that_does_not_fit_names_the_largest_that_does():
    s = scn(simple_tree(30000, 4, 64, 2048), hw="a100-40gb")
    m = memory_fit(s)
    assert m.weights_fit and not m.batch_fits
    kvb = 131072
    need = (4 * 30000 + 256 * 2048) * kvb                        # prefixes stored once, every suffix
    assert m.kv_needed_bytes == need
    budget = 40 * GiB - 8_030_261_248 * 2 - 0.1 * 40 * GiB
    assert m.kv_budget_bytes == pytest.approx(budget)
    assert m.max_sequences == int(budget // (need / 256))
    assert any(f"at most {m.max_sequences:,} sequences" in a for a in m.would_fit)


def test_huge_prefix_gets_no_go(root):
    res = runner.invoke(app, ["estimate", "--model", "llama-3-8b", "--prefix", str(10**7), "--samples", "4",
                              "--output-tokens", "10", "--json"])
    doc = json.loads(res.stdout)
    assert doc["go_no_go"]["level"] == "does-not-fit" and doc["memory"]["fits"] is False
    assert doc["memory"]["max_sequences"] == 0
    assert "tokens of KV in all" in doc["memory"]["would_fit"][-1]


def test_seed_workload_fits_and_keeps_its_verdict(root):
    est = estimate(load_scenario(root / "workloads/rl-rollouts-64.yaml"), IDEAL)
    assert est.memory.fits and est.verdict.level == "go"


def test_every_shipped_workload_reports_memory(root):
    for path in sorted((root / "workloads").glob("*.yaml")):
        est = estimate(load_scenario(path), DEFAULT)
        assert est.memory is not None
        assert (est.verdict.level == "does-not-fit") == (not est.memory.fits), path.name


def test_compare_marks_rows_that_do_not_fit(root):
    res = runner.invoke(app, ["compare", str(root / "workloads/deepseek-v3-grpo-tp8.yaml"), "--hardware",
                              "a100-40gb,h200", "--uncalibrated", "--json"])
    rows = {r["hardware"]: r for r in json.loads(res.stdout)["rows"]}
    assert rows["a100-40gb"]["fits"] is False and rows["a100-40gb"]["verdict"] == "does-not-fit"
    assert rows["a100-40gb"]["max_sequences_fit"] == 0
    assert rows["h200"]["fits"] is True and rows["h200"]["verdict"] != "does-not-fit"
    table = runner.invoke(app, ["compare", str(root / "workloads/deepseek-v3-grpo-tp8.yaml"), "--hardware",
                                "a100-40gb,h200", "--uncalibrated"], env={"COLUMNS": "200"}).stdout
    line = next(ln for ln in table.splitlines() if ln.split()[:1] == ["a100-40gb"])
    assert "does-not-fit" in line and not re.search(r"\d\.\d\dx", line), line
    assert "Does not fit: the weights alone do not fit" in table


def test_check_fails_a_configuration_that_does_not_fit(root, tmp_path):
    res = runner.invoke(app, ["check", str(root / "workloads/deepseek-v3-grpo-tp8.yaml"), "--hardware", "a100-40gb",
                              "--min-run-speedup", "1", "--uncalibrated", "--json"])
    assert res.exit_code == 1
    checks = json.loads(res.stdout)["workloads"]["deepseek-v3-grpo-tp8"]
    assert checks[0]["name"] == "fits_in_memory" and checks[0]["passed"] is False


def test_sweep_fit_by_hand():
    s = scn(simple_tree(1, 1, 1, 1))
    budget = 80 * GiB - 8_030_261_248 * 2 - 0.1 * 80 * GiB
    edge = int(budget // 131072)                                 # prefix tokens of one sequence that fit
    fits = single_level_fits(s, np.array([edge, edge + 1]), 1, 0, 1)
    assert fits.tolist() == [True, False]
    # without prefix caching each of the 4 sequences stores its own copy
    no_cache = msgspec.structs.replace(s, prefix_caching=False)
    assert single_level_fits(no_cache, edge // 4, 4, 0, 1) and not single_level_fits(no_cache, edge // 4 + 1, 4, 0, 1)


@settings(max_examples=40, deadline=None)
@given(p=st.integers(0, 2**22), n=st.integers(1, 4096), s=st.integers(0, 2**16), g=st.integers(1, 16))
def test_sweep_fit_is_monotone(p, n, s, g):
    """If a point fits, every smaller one does (fewer tokens never need more memory)."""
    base = scn(simple_tree(1, 1, 1, 1))
    if single_level_fits(base, p, n, s, g):
        assert single_level_fits(base, p // 2, n, s, g) and single_level_fits(base, p, max(1, n // 2), s, g)
        assert single_level_fits(base, p, n, s // 2, g)


def test_sweep_and_breakeven_carry_fit(root):
    s = load_scenario(root / "workloads/rl-rollouts-64.yaml", "a100-40gb")
    sw = sweep(s, DEFAULT, [1024, 1 << 20], [1, 512], [512], 2)
    assert sw.fits.shape == sw.speedup.shape
    assert sw.fits[0, 0, 0] and not sw.fits[1, 1, 0]
    doc = json.loads(runner.invoke(app, ["breakeven", str(root / "workloads/rl-rollouts-64.yaml"), "--hardware",
                                         "a100-40gb", "--json"]).stdout)
    assert doc["memory"]["weights_fit"] is True
    assert any(not p["fits"] for p in doc["points"]) and any(p["fits"] for p in doc["points"])
    assert all(b["fits"] is None for b in doc["breakeven_prefix_tokens"] if b["prefix_tokens"] is None)
    text = runner.invoke(app, ["breakeven", str(root / "workloads/deepseek-v3-grpo-tp8.yaml"), "--hardware",
                               "a100-40gb", "--uncalibrated"], env={"COLUMNS": "200"}).stdout
    assert "No point of this sweep runs: the weights alone do not fit" in text


def test_report_and_gpu_plot_mark_what_does_not_fit(root, tmp_path):
    res = runner.invoke(app, ["report", str(root / "workloads/deepseek-v3-grpo-tp8.yaml"), "--out", str(tmp_path),
                              "--hardware", "a100-40gb", "--compare-hardware", "a100-40gb,h200", "--no-plots"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["plot", str(root / "workloads/deepseek-v3-grpo-tp8.yaml"), "--out", str(tmp_path),
                              "--hardware", "a100-40gb", "--compare-hardware", "a100-40gb,h200", "--kind", "hardware",
                              "--kind", "steps", "--svg"])        # SVG (text) to search; PNG only without --svg
    assert res.exit_code == 0, res.output
    md = (tmp_path / "report.md").read_text()
    summary = next(ln for ln in md.splitlines() if ln.startswith("| [deepseek-v3-grpo-tp8]"))
    assert "| does not fit | does-not-fit |" in summary
    assert "**Verdict:** Does not fit: the weights alone do not fit" in md
    assert "| a100-40gb | default |" in md and md.count("does not fit |") >= 2
    gpus = (tmp_path / "deepseek-v3-grpo-tp8" / "hardware.svg").read_text()
    assert "does not fit" in gpus
    steps = (tmp_path / "deepseek-v3-grpo-tp8" / "step-times.svg").read_text()
    assert "does not fit in GPU memory: hypothetical times, no verdict" in steps


def test_reserve_option_reaches_every_judging_command(root):
    path = str(root / "workloads/rl-rollouts-64.yaml")
    base = ["--hardware", "a100-40gb", "--uncalibrated", "--json"]
    fits = json.loads(runner.invoke(app, ["estimate", path, *base]).stdout)
    assert fits["memory"]["fits"] and fits["memory"]["reserve_fraction"] == 0.1
    tight = json.loads(runner.invoke(app, ["estimate", path, *base, "--reserve", "0.5"]).stdout)
    assert tight["go_no_go"]["level"] == "does-not-fit" and tight["memory"]["reserve_fraction"] == 0.5
    rows = json.loads(runner.invoke(app, ["compare", path, *base, "--reserve", "0.5"]).stdout)["rows"]
    assert rows[0]["fits"] is False
    be = json.loads(runner.invoke(app, ["breakeven", path, *base, "--reserve", "0.5"]).stdout)
    assert be["memory"]["reserve_fraction"] == 0.5
    assert runner.invoke(app, ["estimate", path, "--reserve", "0.95"]).exit_code == 2
