"""The robustness review's reproducers, one test each: no wrong numbers, one line and exit 2 for bad input, bounded
memory and time, nothing half-written."""

import json
import os
import tracemalloc
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cascade_plan.cli.app import app

from cli_support import refused

ROOT = Path(__file__).resolve().parent.parent
CALIBRATION = next((ROOT / "calibrations").glob("h200-*.json"))
GOOD = ROOT / "workloads" / "rl-rollouts-64.yaml"
runner = CliRunner()


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


def write(tmp_path, text, name="w.yaml"):
    p = tmp_path / name
    p.write_text(text) if isinstance(text, str) else p.write_bytes(text)
    return p


def workload(tmp_path, tree, extra="", name="w.yaml"):
    return write(tmp_path, f"schema_version: 1\nmodel: llama-3-8b\n{extra}tree: {tree}\n", name)


# ---- 1-3: wrong numbers --------------------------------------------------------------------------

def test_one_sequence_with_an_empty_prompt_is_never_a_cascade_win(tmp_path):
    p = workload(tmp_path, "{tokens: 0, samples: 1, output_tokens: 1}", "hardware: h200\nprefix_caching: false\n")
    doc = json.loads(run("estimate", p, "--json").stdout)
    assert doc["run"]["speedup"] <= 1.0
    assert doc["go_no_go"]["level"] == "no-go" and "1.00x" in doc["go_no_go"]["text"]
    text = " ".join(run("estimate", p).stdout.split())
    assert "Average speedup over the run: 1.00x" in text and "No-go" in text


@pytest.mark.parametrize("model, tree, backend", [      # cases the fuzz found "winning" before the fix
    ("mistral-7b", "{tokens: 0, samples: 1, output_tokens: 1}", "triton"),
    ("llama-3-70b", "{tokens: 0, samples: 1, output_tokens: 5}", None),
    ("llama-3-8b", "{tokens: 0, copies: 163, children: [{tokens: 8134, samples: 1, output_tokens: 283}, "
                   "{tokens: 239, copies: 110, samples: 1, output_tokens: 290}]}", "torch"),
    ("llama-3-8b", "{tokens: 0, children: [{tokens: 3000, samples: 1, output_tokens: 40}, "
                   "{tokens: 70, copies: 5, samples: 1, output_tokens: 7}]}", "flashinfer-fa2"),
])
def test_no_shared_node_means_cascade_is_never_faster_in_any_mode(tmp_path, model, tree, backend):
    p = write(tmp_path, f"schema_version: 1\nmodel: {model}\nhardware: h200\nprefix_caching: false\ntree: {tree}\n")
    args = ["estimate", p, "--json"] + (["--backend", backend] if backend else [])
    doc = json.loads(run(*args).stdout)
    for key in ("first_step", "middle_step", "final_step"):
        assert doc[key]["cascade"]["step_s"] >= doc[key]["per_sequence"]["step_s"]
    assert doc["run"]["speedup"] <= 1.0 and doc["go_no_go"]["level"] in ("no-go", "does-not-fit")


def test_products_that_wrapped_int64_are_refused_and_the_largest_valid_sizes_stay_positive(tmp_path):
    refused(run("estimate", workload(tmp_path, "{tokens: 1000000, copies: 10000000, samples: 1000000, "
                                               "output_tokens: 2}")),
            "tree.copies")
    refused(run("estimate", workload(tmp_path, "{tokens: 9223372036854775807, samples: 1, output_tokens: 1}")),
            "tree.tokens")
    big = workload(tmp_path, "{tokens: 10000000, copies: 1000, children: [{tokens: 10000000, copies: 1000, "
                             "samples: 1000, "
                             "output_tokens: 2}]}")
    doc = json.loads(run("estimate", big, "--json", "--ideal").stdout)
    assert doc["unique_prefix_kv_bytes"] > 0 and doc["run"]["speedup"] > 0 and doc["sequences"] == 10**9


@pytest.mark.parametrize("line", ["hbm_bytes_per_s: 1.0e-300", "hbm_bytes_per_s: .inf", "hbm_bytes_per_s: .nan",
                                  "memory_bytes: .inf"])
def test_hardware_numbers_out_of_range_are_refused(tmp_path, line):
    text = (ROOT / "hardware_profiles" / "h200.yaml").read_text()
    key = line.split(":")[0]
    lines = [line if ln.startswith(key + ":") else ln for ln in text.splitlines()]
    hw = write(tmp_path, "\n".join(lines) + "\n", "hw.yaml")
    refused(run("estimate", "--model", "llama-3-8b", "--hardware", hw, "--prefix", "10", "--samples", "2",
                "--output-tokens", "3"), key)


@pytest.mark.parametrize("option, value", [("--hbm-bandwidth", "1e-300"), ("--hbm-bandwidth", "1e30"),
                                           ("--memory", "1e-9"), ("--bf16-tflops", "1e300"), ("--l2", "1e30")])
def test_what_if_hardware_numbers_are_range_checked(option, value):
    refused(run("estimate", GOOD, option, value), option, "plausible")


HF = {"model_type": "llama", "vocab_size": 1000, "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 4,
      "num_attention_heads": 8, "num_key_value_heads": 2}


@pytest.mark.parametrize("change, field", [
    ({"head_dim": -64}, "head_dim"), ({"head_dim": 0}, "head_dim"), ({"hidden_size": 4}, "hidden_size"),
    ({"kv_lora_rank": -512}, "kv_lora_rank"), ({"head_dim": "128"}, "head_dim"),
    ({"num_local_experts": "eight"}, "num_local_experts"), ({"sliding_window": "4k"}, "sliding_window"),
    ({"num_local_experts": 8, "num_experts_per_tok": 2, "mlp_only_layers": [{}]}, "mlp_only_layers"),
    ({"num_hidden_layers": True}, "num_hidden_layers"), ({"vocab_size": 2**64}, "vocab_size"),
])
def test_hf_config_with_wrong_types_or_ranges_is_one_line(tmp_path, change, field):
    cfg = write(tmp_path, json.dumps({**HF, **change}), "config.json")
    refused(run("estimate", "--model", cfg, "--prefix", "10", "--samples", "2", "--output-tokens", "3"), field,
            "config.json")


def _calibration(tmp_path, mutate, name="cal.json"):
    doc = json.loads(CALIBRATION.read_text())
    mutate(doc)
    return write(tmp_path, json.dumps(doc), name)


def test_calibrate_on_a_zero_ceiling_or_negative_median_writes_nothing(tmp_path):
    def zero(d):
        d["fitted"] = {}
        d["ceilings"]["hbm_read_bytes_per_s"] = 0

    def negative(d):
        d["fitted"] = {}
        d["measurements"][7]["median_s"] = -1e-5

    for mutate, field in ((zero, "ceilings.hbm_read_bytes_per_s"), (negative, "measurements[7].median_s")):
        src = _calibration(tmp_path, mutate)
        refused(run("calibrate", src, "--out", tmp_path / "out.json"), field)
        assert not (tmp_path / "out.json").exists()


def test_a_fit_with_a_non_positive_parameter_is_an_error(monkeypatch, tmp_path):
    from cascade_plan.calibration import probe_fit

    real = probe_fit.calibrate

    def broken(probe):
        fitted = real(probe)
        fitted["kv_dtypes"]["bf16"]["triton"]["prefix"]["bw_bytes_per_s"] = float("nan")
        return fitted

    monkeypatch.setattr(probe_fit, "calibrate", broken)
    src = _calibration(tmp_path, lambda d: d.__setitem__("fitted", {}))
    refused(run("calibrate", src, "--out", tmp_path / "out.json"), "fitted.kv_dtypes.bf16.triton.prefix.bw_bytes_per_s")
    assert not (tmp_path / "out.json").exists()


# ---- 4-5: tracebacks -----------------------------------------------------------------------------

@pytest.mark.parametrize("tree, field", [
    ("{tokens: 9223372036854775808, samples: 1, output_tokens: 1}", "tree.tokens"),
    ("{tokens: 1, samples: 18446744073709551616, output_tokens: 1}", "tree.samples"),
    ("{tokens: 1, samples: 1, output_tokens: 9223372036854775807}", "tree.output_tokens"),
    ("{tokens: 1, children: [{tokens: 1, copies: 99999999999999999999, samples: 1, output_tokens: 1}]}",
     "tree.children[0].copies"),
])
def test_huge_integers_anywhere_in_the_tree_are_one_line(tmp_path, tree, field):
    refused(run("estimate", workload(tmp_path, tree)), field)


@pytest.mark.parametrize("mutate, field", [
    (lambda d: d.__setitem__("measurements", {}), "measurements"),
    (lambda d: d.__setitem__("fitted", [1]), "fitted"),
    (lambda d: d["device"].pop("l2_bytes"), "device.l2_bytes"),
    (lambda d: d["measurements"][900].pop("config"), "measurements[900].config"),
    (lambda d: d["fitted"]["kv_dtypes"]["bf16"]["torch"]["suffix"].__setitem__("overhead_s", -1),
     "fitted.kv_dtypes.bf16.torch.suffix.overhead_s"),
    (lambda d: d["fitted"]["kv_dtypes"]["bf16"]["flashinfer"]["suffix"].__setitem__("bw_bytes_per_s", 1e-300),
     "fitted.kv_dtypes.bf16.flashinfer.suffix.bw_bytes_per_s"),        # found by the fuzz campaign
    (lambda d: d["fitted"]["kv_dtypes"]["bf16"]["triton"]["decode_shared"].__setitem__("l2_bytes_per_s", 1e-300),
     "fitted.kv_dtypes.bf16.triton.decode_shared.l2_bytes_per_s"),
    (lambda d: d["fitted"]["kv_dtypes"]["bf16"]["triton"]["prefix"]["surface"]["values"][0].__setitem__(0, 800.0),
     "fitted.kv_dtypes.bf16.triton.prefix.surface"),
])
def test_calibration_files_with_the_wrong_structure_are_one_line(tmp_path, mutate, field):
    cal = _calibration(tmp_path, mutate)
    refused(run("validate", cal), field)
    refused(run("estimate", GOOD, "--hardware", "h200", "--calibration", cal), field)


@pytest.mark.parametrize("axis", ["1:inf:lin", "1e30", "1:1e20:log", "1:1e9:lin:1e9", "nan", "1:100000:1"])
def test_breakeven_axes_out_of_range_are_one_line(axis):
    refused(run("breakeven", "--model", "llama-3-8b", "--prefix", axis), "--prefix")


def test_breakeven_grid_is_capped():
    refused(run("breakeven", "--model", "llama-3-8b", "--prefix", "1:4000:1", "--batch", "1:4000:1"), "at most")


def test_output_paths_that_cannot_be_written_are_one_line_and_write_nothing(tmp_path):
    afile = write(tmp_path, "x", "afile")
    folder = tmp_path / "folder"
    folder.mkdir()
    refused(run("report", GOOD, "--out", afile, "--no-plots"), "--out", "is a file")
    refused(run("report", GOOD, "--out", afile / "sub", "--no-plots"), "--out", "not a folder")
    refused(run("plot", GOOD, "--out", afile), "--out")
    refused(run("check", GOOD, "--min-run-speedup", "1", "--junit", folder), "--junit", "is a folder")
    refused(run("check", GOOD, "--min-run-speedup", "1", "--markdown", afile / "x.md"), "--markdown")
    refused(run("calibrate", CALIBRATION, "--out", folder), "--out", "is a folder")
    refused(run("validate", CALIBRATION, "--plots", afile), "--plots", "is a file")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "folder"] and not list(folder.iterdir())


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root writes anywhere")
def test_unwritable_output_folder_is_one_line(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    refused(run("report", GOOD, "--out", ro / "r", "--no-plots"), "not writable")


def test_a_tree_hundreds_of_levels_deep_is_one_line_without_recursion(tmp_path):
    tree = "{tokens: 1, samples: 1, output_tokens: 1}"
    for _ in range(495):
        tree = "{tokens: 1, children: [" + tree + "]}"
    refused(run("estimate", workload(tmp_path, tree)), "levels deep")


def test_option_errors_are_one_line():
    refused(run("estimate", "--tp", "0"), "--tp")
    refused(run("estimate", "--no-such-option"), "--no-such-option")
    refused(run("no-such-command"), "no-such-command")
    refused(run("plot"), "Missing argument")


def test_nul_byte_names_its_line(tmp_path):
    p = write(tmp_path, b"schema_version: 1\nmodel: llama-3-8b\ntree: {tokens: 1,\x00 samples: 1, output_tokens: 1}\n")
    refused(run("estimate", p), "w.yaml:3:", "U+0000")


def test_empty_model_names_file_and_field(tmp_path):
    p = write(tmp_path, "schema_version: 1\nmodel: ''\ntree: {tokens: 1, samples: 1, output_tokens: 1}\n")
    refused(run("estimate", p), "w.yaml:2:", "model:", "empty")
    refused(run("estimate", "--model", "", "--prefix", "1", "--samples", "1", "--output-tokens", "1"), "empty")


def test_integer_key_in_a_node_names_its_line(tmp_path):
    p = write(tmp_path, "schema_version: 1\nmodel: llama-3-8b\ntree:\n  tokens: 5\n  samples: 2\n  7: 3\n"
                        "  output_tokens: 4\n")
    refused(run("estimate", p), "w.yaml:6:", "tree.7", "field names must be text")


# ---- 6-8: bounded memory and time, aliases, duplicate keys ---------------------------------------

def _peak_mib(fn) -> float:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("output_tokens", [10**5, 10**7])
def test_long_runs_answer_in_memory_that_does_not_grow_with_output_tokens(tmp_path, output_tokens):
    p = workload(tmp_path, f"{{tokens: 4096, copies: 2, samples: 64, output_tokens: {output_tokens}}}")
    res = {}
    peak = _peak_mib(lambda: res.setdefault("r", run("estimate", p, "--json", "--uncalibrated")))
    assert res["r"].exit_code == 0
    assert json.loads(res["r"].stdout)["decode_steps"] == output_tokens
    assert peak < 100, peak


def test_run_sum_over_sampled_steps_matches_the_step_by_step_sum():
    from cascade_plan.cost.cost_model import gpu_shape
    from cascade_plan.cost.cost_params import DEFAULT
    from cascade_plan.cost.flat_tree import flatten
    from cascade_plan.cost.run_load import tree_run_costs
    from cascade_plan.inputs.hardware import load_hardware
    from cascade_plan.inputs.model_spec import load_preset
    from cascade_plan.inputs.workload import TreeNode

    m, hw = load_preset("llama-3-8b"), load_hardware("h100-sxm")
    g = gpu_shape(m, hw, "bf16", "bf16", 1)
    tree = TreeNode(tokens=2048, children=[TreeNode(tokens=512, copies=3, samples=16, output_tokens=30000),
                                           TreeNode(tokens=64, samples=4, output_tokens=7000, private_tokens=100)])
    flat = flatten(tree)
    exact = tree_run_costs(flat, g, m, "bf16", 1, DEFAULT, budget=10**6)
    sampled = tree_run_costs(flat, g, m, "bf16", 1, DEFAULT)
    assert exact.costs.steps.size == 30000 and sampled.costs.steps.size < 10000
    assert exact.weights.sum() == sampled.weights.sum() == 30000
    for field in ("ps_step_s", "cas_step_s"):
        a, b = exact.run_total(getattr(exact.costs, field)), sampled.run_total(getattr(sampled.costs, field))
        assert b == pytest.approx(a, rel=1e-4)


def test_five_thousand_children_are_refused_before_any_large_allocation(tmp_path):
    kids = ", ".join("{tokens: %d, samples: 1, output_tokens: 5}" % i for i in range(5000))
    p = workload(tmp_path, "{tokens: 100, children: [" + kids + "]}")
    peak = _peak_mib(lambda: refused(run("estimate", p), "nodes"))
    assert peak < 200


def test_a_billion_sequences_through_check_stay_bounded(tmp_path):
    # a prefix every request shares takes vLLM's gate past its request count (it once built one array
    # element per request there: 8 GB)
    p = workload(tmp_path, "{tokens: 4096, children: [{tokens: 1, copies: 1000, samples: 1000000, "
                           "output_tokens: 100}]}")
    res = {}
    peak = _peak_mib(lambda: res.setdefault("r", run("check", p, "--min-run-speedup", "1", "--json")))
    assert res["r"].exit_code in (0, 1) and peak < 100       # 1: a billion sequences do not fit in memory


def test_yaml_aliases_are_refused_before_expansion(tmp_path):
    text = "schema_version: 1\nmodel: llama-3-8b\nbogus0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1]\n"
    text += "".join(f"bogus{i}: &a{i} [" + ", ".join([f"*a{i-1}"] * 9) + "]\n" for i in range(1, 9))
    text += "tree: {tokens: 1, samples: 1, output_tokens: 1}\n"
    peak = _peak_mib(lambda: refused(run("estimate", write(tmp_path, text)), "w.yaml:4:", "aliases"))
    assert peak < 50


def test_duplicate_keys_are_refused_naming_both_lines(tmp_path):
    p = write(tmp_path, "schema_version: 1\nmodel: llama-3-8b\ntree:\n  tokens: 5\n  samples: 64\n  output_tokens: 3\n"
                        "  samples: 2\n")
    refused(run("estimate", p), "w.yaml:7:", "duplicate key 'samples'", "line 5", "line 7")


# ---- 9: files ------------------------------------------------------------------------------------

def test_report_with_a_bad_workload_writes_nothing(tmp_path):
    bad = workload(tmp_path, "{tokens: 1, samples: 0, output_tokens: 1}", name="bad.yaml")
    refused(run("report", GOOD, bad, "--out", tmp_path / "rep"), "bad.yaml")
    assert not (tmp_path / "rep").exists()


def test_report_failing_midway_leaves_the_previous_report_whole(tmp_path, monkeypatch):
    out = tmp_path / "rep"
    assert run("report", GOOD, "--out", out, "--no-plots", "--compare-hardware", "").exit_code == 0
    before = (out / "report.md").read_text()
    import cascade_plan.render.report as report_mod

    def boom(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(report_mod, "build_report", boom)
    res = run("report", GOOD, "--out", out, "--compare-hardware", "h200")
    assert res.exit_code != 0
    assert (out / "report.md").read_text() == before and not list(out.glob("*/*.png"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rep", "rl-rollouts-64.yaml"] or \
        sorted(p.name for p in tmp_path.iterdir()) == ["rep"]


def test_report_refuses_to_replace_a_folder_with_other_files(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    refused(run("report", GOOD, "--out", tmp_path, "--no-plots"), "not a cascade-plan report")
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_check_writes_junit_and_markdown_together_or_not_at_all(tmp_path):
    afile = write(tmp_path, "x", "afile")
    refused(run("check", GOOD, "--min-run-speedup", "1", "--junit", tmp_path / "ok.xml", "--markdown", afile / "x.md"),
            "--markdown")
    assert not (tmp_path / "ok.xml").exists()
    res = run("check", GOOD, "--min-run-speedup", "1", "--junit", tmp_path / "ok.xml", "--markdown", tmp_path / "s.md")
    assert res.exit_code == 0 and (tmp_path / "ok.xml").exists() and (tmp_path / "s.md").exists()


def test_stale_temporary_files_of_killed_runs_are_removed(tmp_path):
    from cascade_plan.atomic import write_text_atomic

    dead = tmp_path / ".out.json.999999999.abcd1234.tmp"      # no such pid
    dead.write_text("half")
    legacy = tmp_path / ".out.json.k3j4h5g6.tmp"               # an older version's name, old
    legacy.write_text("half")
    os.utime(legacy, (1, 1))
    alive = tmp_path / f".out.json.{os.getpid()}.zzzz0000.tmp"  # a live writer's: left alone
    alive.write_text("busy")
    write_text_atomic(tmp_path / "out.json", "{}")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([alive.name, "out.json"])


def test_report_folder_swap_leaves_no_temporary_folders(tmp_path):
    out = tmp_path / "rep"
    killed = tmp_path / ".rep.999999999.abcd1234.tmpdir"     # a killed run's half-built report
    killed.mkdir()
    (killed / "report.md").write_text("half")
    for _ in range(2):
        assert run("report", GOOD, "--out", out, "--no-plots").exit_code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rep"]
    assert {p.name for p in out.iterdir()} == {"report.md", ".cascade-plan-report"}


def test_concurrent_reports_into_one_folder_leave_one_whole_report(tmp_path):
    import subprocess
    import sys

    out = tmp_path / "rep"
    names = []
    for i in range(3):      # three workloads with different names: the report says which run won
        text = GOOD.read_text().replace("schema_version: 1", f"schema_version: 1\nname: run-{i}", 1)
        names.append(write(tmp_path, text, f"w{i}.yaml"))
    procs = [subprocess.Popen([sys.executable, "-m", "cascade_plan", "report", str(w), "--out", str(out), "--no-plots",
                               "--compare-hardware", ""], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for w in names]
    codes = [p.wait(timeout=120) for p in procs]
    errs = [p.stderr.read().decode() for p in procs]
    # A run either wrote its whole report (exit 0), or was told another one held the folder (exit 2, one line):
    # none prints `wrote` and is then silently discarded by a concurrent swap.
    assert 0 in codes and set(codes) <= {0, 2}, errs
    for code, err in zip(codes, errs):
        if code == 2:
            assert len(err.strip().splitlines()) == 1 and "another cascade-plan report is writing" in err, err
    assert {p.name for p in out.iterdir()} == {"report.md", ".cascade-plan-report"}
    text = (out / "report.md").read_text()
    assert sum(f"run-{i}" in text for i in range(3)) == 1            # one run's report, whole
    assert codes[[f"run-{i}" in text for i in range(3)].index(True)] == 0     # ... from a run that said so
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rep", "w0.yaml", "w1.yaml", "w2.yaml"]
