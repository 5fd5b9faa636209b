"""CLI through typer's CliRunner: commands, JSON keys, and one clear line + exit 2 for bad input."""

import json
import subprocess
import sys
import textwrap

import pytest
from typer.testing import CliRunner

from cascade_plan.cli.app import app

runner = CliRunner()


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_estimate_table_has_every_section(root):
    res = run("estimate", root / "workloads/rl-rollouts-64.yaml", "--uncalibrated")
    assert res.exit_code == 0, res.output
    for text in ("KV bytes per token", "131,072 B = 128 KiB", "weights read per step", "first (k=1)",
                 "middle (k=512)", "final (k=1024)", "Whole run", "Average speedup", "Marginal (uncalibrated",
                 "within the error of these numbers", "uncalibrated"):
        assert text in res.stdout, text


def test_estimate_on_h100_is_calibrated_from_aiconfigurator_and_says_so(root):
    res = run("estimate", root / "workloads/rl-rollouts-64.yaml", "--hardware", "h100-sxm")
    assert res.exit_code == 0, res.output
    text = " ".join(res.stdout.split())
    assert "calibrated from AIConfigurator vllm" in text and "cascade parts transferred from the H200 probe" in text
    assert "uncalibrated" not in text


def test_estimate_json_has_documented_keys(root):
    res = run("estimate", root / "workloads/system-prompt-document-samples.yaml", "--json", "--uncalibrated")
    doc = json.loads(res.stdout)
    for key in ("kv_bytes_per_token", "weight_bytes"):
        assert key in doc
    for mode in ("per_sequence", "cascade"):
        assert {"attention_bytes", "step_s"} <= set(doc["final_step"][mode])
    assert {"per_sequence_s", "cascade_s", "speedup"} <= set(doc["run"])
    assert doc["mode"] == "default" and len(doc["prefix_nodes"]) == 3


def test_hardware_override(root):
    a = json.loads(run("estimate", root / "workloads/rl-rollouts-64.yaml", "--json", "--uncalibrated").stdout)
    b = json.loads(run("estimate", root / "workloads/rl-rollouts-64.yaml", "--json", "--hardware", "h200",
                       "--uncalibrated").stdout)
    assert (a["hardware"], b["hardware"]) == ("h100-sxm", "h200")
    assert (a["mode"], b["mode"]) == ("default", "default")
    assert b["run"]["cascade_s"] < a["run"]["cascade_s"]          # same efficiencies, more bandwidth
    c = json.loads(run("estimate", root / "workloads/rl-rollouts-64.yaml", "--json", "--hardware", "h200").stdout)
    assert c["mode"] == "calibrated"                                # the shipped H200 calibration is picked up


def test_tp_and_kv_dtype_options():
    doc = json.loads(run("estimate", "--model", "llama-3-70b", "--prefix", "4096", "--samples", "32",
                         "--output-tokens", "256", "--tp", "8", "--kv-dtype", "fp8", "--json").stdout)
    assert doc["kv_bytes_per_token"] == 20_480 and doc["tp"] == 8


def test_models_and_hardware_lists():
    res = run("models", "--json")
    rows = {r["id"]: r for r in json.loads(res.stdout)["models"]}
    assert rows["llama-3-8b"]["kv_bytes_per_token"] == 131_072
    assert len(rows) == 8
    res = run("models", "--tp", "8")
    assert res.exit_code == 0 and "deepseek-v3" in res.stdout
    hw = json.loads(run("hardware", "--json").stdout)["hardware"]
    assert {h["id"] for h in hw} >= {"h100-sxm", "h100-pcie", "h200", "a100-80gb", "a100-40gb", "b200", "gh200",
                                     "mi300x", "l40s", "rtx-4090"}
    res = run("hardware", "h200")
    assert res.exit_code == 0 and "source for hbm_bytes_per_s" in res.stdout


def test_module_entry_point(root):
    out = subprocess.run([sys.executable, "-m", "cascade_plan", "estimate", str(root / "workloads/beam-search.yaml"),
                          "--json"], capture_output=True, text=True, cwd=root)
    assert out.returncode == 0 and json.loads(out.stdout)["workload"] == "beam-search"


# What `estimate` must not load: the heavy libraries, and the parts of the package (and of its light
# dependencies) that only other commands use: logs, serving, plotting, the breakeven search, the probe's
# runner, the calibration fit, file writing; rich's progress bars and markdown, DuckDB, Spark, zstd.
NOT_FOR_ESTIMATE = ("pandas", "matplotlib", "torch", "triton", "pydantic", "pyarrow", "aiconfigurator_core", "numpy.ma",
                    "duckdb", "pyspark", "zstandard", "scipy", "numpy.random", "multiprocessing", "concurrent.futures",
                    "xml", "tempfile", "asyncio", "rich.progress", "rich.markdown", "rich.syntax",
                    "cascade_plan.logs", "cascade_plan.serving", "cascade_plan.engine", "cascade_plan.cost.breakeven",
                    "cascade_plan.render.plots", "cascade_plan.render.breakeven_report", "cascade_plan.outputs",
                    "cascade_plan.calibration.probe_fit", "cascade_plan.calibration.validation", "kernels_probe.runner")


def test_estimate_imports_no_heavy_modules(root):
    # Modules the interpreter loaded before our code ran (a site-packages .pth file: CI's Python imports certifi,
    # and with it tempfile, at start-up) are not estimate's doing.
    code = ("import sys; before = set(sys.modules); from cascade_plan.cli.app import main; "
            f"sys.argv=['cascade-plan','estimate',{str(root / 'workloads/rl-rollouts-64.yaml')!r}]\n"
            "try: main()\nexcept SystemExit: pass\n"
            f"print('HEAVY', sorted(m for m in {NOT_FOR_ESTIMATE!r} if m in sys.modules and m not in before))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root)
    assert "HEAVY []" in out.stdout, out.stdout[-500:] + out.stderr


# ---- bad input: one line, exit 2, names file / field / line -------------------------------------------------

def write(tmp_path, text, name="w.yaml"):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


SEED = """\
    schema_version: 1
    model: llama-3-8b
    hardware: h100-sxm
    tree:
      tokens: 4096
      copies: 2
      samples: 64
      output_tokens: 1024
    """

BAD = {
    "unknown key": (SEED.replace("copies: 2", "copies: 2\n      colour: red"), ":7: tree.colour: unknown field"),
    "wrong type": (SEED.replace("samples: 64", "samples: many"), ":7: tree.samples: Expected `int | null`, got `str`"),
    "negative length": (SEED.replace("tokens: 4096", "tokens: -5"), ":5: tree.tokens: Expected `int` >= 0"),
    "zero output": (SEED.replace("output_tokens: 1024", "output_tokens: 0"),
                    ":8: tree.output_tokens: Expected `int` >= 1"),
    "unknown preset": (SEED.replace("llama-3-8b", "llama-9b"), ":2: model: unknown model 'llama-9b'"),
    "unknown hardware": (SEED.replace("h100-sxm", "h900"), ":3: hardware: unknown hardware 'h900'"),
    "yaml syntax": (SEED.replace("copies: 2", "copies: [2"), "YAML syntax error"),
    "missing field": ("schema_version: 1\nmodel: llama-3-8b\n", "tree: required field is missing"),
    "leaf without output": (SEED.replace("      output_tokens: 1024\n", ""), "tree: a leaf node needs `output_tokens`"),
    "bad kv dtype": (SEED + "kv_dtype: fp7\n", ":9: kv_dtype: Invalid enum value 'fp7'"),
    "bad tp": (SEED + "tp: 3\n", ":9: tp: tensor-parallel degree 3 does not divide the 32 query heads"),
    "newer schema": (SEED.replace("schema_version: 1", "schema_version: 2"), ":1: schema_version: unsupported"),
    "not a mapping": ("- 1\n- 2\n", "must contain a mapping"),
    "missing config": (SEED.replace("llama-3-8b", "configs/nope.json"), "model config file not found"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_workload_gives_one_line_and_exit_2(tmp_path, case):
    text, expected = BAD[case]
    path = write(tmp_path, text)
    res = run("estimate", path)
    assert res.exit_code == 2, res.output
    assert res.stdout == ""
    err = res.stderr.strip()
    assert err.count("\n") == 0 and "Traceback" not in err, err
    assert expected in err, err
    assert err.startswith("error: ")


def test_bad_config_json_names_file_and_field(tmp_path, data):
    path = write(tmp_path, SEED.replace("llama-3-8b", str(data / "missing-layers-config.json")))
    res = run("estimate", path)
    assert res.exit_code == 2 and "missing-layers-config.json" in res.stderr and "num_hidden_layers" in res.stderr


def test_missing_workload_file():
    res = run("estimate", "no/such/file.yaml")
    assert res.exit_code == 2 and "no/such/file.yaml: workload file not found" in res.stderr


def test_quick_mode_needs_all_fields():
    res = run("estimate", "--model", "llama-3-8b", "--prefix", "100")
    assert res.exit_code == 2 and "--samples, --output-tokens" in res.stderr


def test_negative_option_is_rejected():
    res = run("estimate", "--model", "llama-3-8b", "--prefix", "-1", "--samples", "2", "--output-tokens", "5")
    assert res.exit_code == 2


def test_bad_hardware_profile_file(tmp_path):
    p = write(tmp_path, "schema_version: 1\nid: x\nname: X\nvendor: nvidia\nhbm_bytes_per_s: 0\n", "hw.yaml")
    res = run("estimate", "--model", "llama-3-8b", "--prefix", "100", "--samples", "2", "--output-tokens", "5",
              "--hardware", p)
    assert res.exit_code == 2 and "hw.yaml:5: hbm_bytes_per_s: Expected `float` >= 1000000000.0" in res.stderr


def test_probe_without_torch_or_gpu_says_what_is_missing(tmp_path):
    res = run("probe", "--out", tmp_path / "cal.json", "--quick")
    assert res.exit_code == 2
    assert "cannot run the probe" in res.stderr
    assert not (tmp_path / "cal.json").exists()


def test_a_profile_name_with_brackets_and_colons_prints_as_written(tmp_path):
    """Rich reads `[red]` as markup and `:rocket:` as an emoji code; a user's GPU name is shown as the user wrote it."""
    from cli_support import ROOT

    text = (ROOT / "hardware_profiles" / "h100-sxm.yaml").read_text()
    swap = {"name:": 'name: "Lab GPU [red] :rocket:"', "id:": "id: labgpu"}
    lines = [next((v for k, v in swap.items() if ln.startswith(k)), ln) for ln in text.splitlines()]
    hw = tmp_path / "lab.yaml"
    hw.write_text("\n".join(lines) + "\n")
    for command in ("estimate", "breakeven"):
        res = run(command, "rl-rollouts-64", "--hardware", hw)
        assert res.exit_code == 0 and "Lab GPU [red] :rocket:" in res.stdout, (command, res.output[:600])
