"""Ids people type: shipped workloads by name, case-insensitive ids, aliases, did-you-mean, HF repo ids, model
folders, and the local Hugging Face cache (never a download)."""

import json

import pytest
from typer.testing import CliRunner

from cascade_plan import InputError, builtin_workloads, load_hardware, load_model
from cascade_plan.cli.app import app
from cascade_plan.inputs.workload_catalog import resolve_workload

runner = CliRunner()
QUICK = ["--prefix", "4096", "--samples", "64", "--output-tokens", "1024"]


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_shipped_workload_by_name_from_any_folder(tmp_path, monkeypatch, root):
    monkeypatch.chdir(tmp_path)
    by_name = json.loads(run("estimate", "rl-rollouts-64", "--json").stdout)
    by_path = json.loads(run("estimate", root / "workloads/rl-rollouts-64.yaml", "--json").stdout)
    assert by_name["run"] == by_path["run"] and by_name["workload"] == "rl-rollouts-64"
    assert json.loads(run("estimate", "RL-Rollouts-64.yaml", "--json").stdout)["run"] == by_path["run"]


def test_a_file_in_the_folder_wins_over_a_shipped_name(tmp_path, monkeypatch, root):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "rl-rollouts-64").write_text((root / "workloads/rl-rollouts-64.yaml").read_text()
                                             .replace("samples: 64", "samples: 8"))
    assert json.loads(run("estimate", "rl-rollouts-64", "--json").stdout)["sequences"] == 16


def test_unknown_workload_name_suggests_the_nearest(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = run("estimate", "rl-rolouts-64")
    assert res.exit_code == 2 and "did you mean rl-rollouts-64?" in res.output
    assert "Traceback" not in res.output and len(res.output.strip().splitlines()) == 1


def test_workload_rows_count_the_sequences_flatten_counts():
    """The listing counts a tree's sequences without the cost model's flatten: both counts agree."""
    from cascade_plan.cost.flat_tree import flatten
    from cascade_plan.inputs.workload import parse_workload
    from cascade_plan.inputs.workload_rows import workload_rows

    rows = workload_rows()
    assert len(rows) == len(builtin_workloads()) > 1
    for row in rows:
        assert row["sequences"] == flatten(parse_workload(row["path"])[0].tree).total_seqs, row["name"]


def test_workloads_command_lists_every_shipped_workload():
    doc = json.loads(run("workloads", "--json").stdout)
    assert [r["name"] for r in doc["workloads"]] == list(builtin_workloads())
    rl = next(r for r in doc["workloads"] if r["name"] == "rl-rollouts-64")
    assert (rl["model"], rl["sequences"]) == ("llama-3-8b", 128) and rl["description"].startswith("The seed's")
    table = run("workloads")
    assert table.exit_code == 0 and "system-prompt-document-samples" in table.stdout   # whole names in a pipe
    path = run("workloads", "--path", "Beam-Search").stdout.strip()
    assert path == str(resolve_workload("beam-search")) and path.endswith("beam-search.yaml")


def test_help_examples_use_names_that_work_after_a_plain_install():
    for cmd in ("estimate", "breakeven", "compare", "check", "plot", "report"):
        assert "workloads/" not in run(cmd, "--help").stdout, cmd


@pytest.mark.parametrize("ref, expected", [("H200", "h200"), ("h100", "h100-sxm"), ("A100", "a100-80gb"),
                                           ("a100-40GB", "a100-40gb")])
def test_hardware_ids_any_case_and_aliases(ref, expected):
    assert load_hardware(ref).id == expected


def test_hardware_typo_did_you_mean():
    with pytest.raises(InputError, match=r"did you mean h200 or gh200\?"):
        load_hardware("h20O")


@pytest.mark.parametrize("ref, preset", [("meta-llama/Meta-Llama-3-8B", "llama-3-8b"),
                                         ("META-LLAMA/meta-llama-3-70b", "llama-3-70b"),
                                         ("deepseek-ai/DeepSeek-V3", "deepseek-v3"), ("Llama-3-8B", "llama-3-8b")])
def test_model_ids_people_type(ref, preset):
    assert load_model(ref) == load_model(preset)


def test_model_typo_did_you_mean():
    with pytest.raises(InputError, match=r"did you mean llama-3-8b"):
        load_model("llama3-8b")


def _hf_config(root):
    from cascade_plan.inputs.model_presets import PRESETS

    return dict(PRESETS["mistral-7b"][1])


def test_model_folder_holding_config_json(tmp_path, root):
    folder = tmp_path / "my-finetune"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(_hf_config(root)))
    spec = load_model(str(folder))
    assert spec.id == "my-finetune" and spec.total_params == load_model("mistral-7b").total_params


def test_hf_repo_id_from_the_local_cache_only(tmp_path, monkeypatch, root):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(InputError, match="not in the local cache"):
        load_model("acme/tiny-mistral")
    snap = tmp_path / "models--acme--tiny-mistral" / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text(json.dumps(_hf_config(root)))
    (tmp_path / "models--acme--tiny-mistral" / "refs").mkdir()
    (tmp_path / "models--acme--tiny-mistral" / "refs" / "main").write_text("abc123")
    spec = load_model("acme/tiny-mistral")
    assert spec.id == "acme/tiny-mistral" and spec.num_layers == 32
    res = run("estimate", "--model", "ACME/Tiny-Mistral", *QUICK, "--json")
    assert res.exit_code == 0 and json.loads(res.stdout)["model"] == "acme/tiny-mistral"


def test_what_if_hardware_is_labelled_user_supplied_everywhere(tmp_path):
    base = json.loads(run("estimate", "rl-rollouts-64", "--hardware", "h100", "--json").stdout)
    doc = json.loads(run("estimate", "rl-rollouts-64", "--hardware", "h100", "--hbm-bandwidth", "6.7", "--json").stdout)
    # the profile's calibration, scaled to the new peaks and labelled (not the defaults)
    assert "what-if, user-supplied: HBM 6.7 TB/s" in doc["hardware"] and doc["mode"] == "calibrated"
    assert doc["calibration"]["label"].startswith("what-if on measured kernels of h100-sxm (HBM x2")
    assert doc["weight_s"] < 0.6 * base["weight_s"]                                 # twice the bandwidth
    assert doc["run"]["per_sequence_s"] < base["run"]["per_sequence_s"]
    table = run("estimate", "rl-rollouts-64", "--memory", "96GiB", "--l2", "60MiB")
    assert "what-if, user-supplied: memory 96GiB, L2 60MiB" in table.stdout
    rows = json.loads(run("compare", "rl-rollouts-64", "--hardware", "h100,h200", "--bf16-tflops", "2000",
                          "--json").stdout)["rows"]
    assert all("user-supplied: bf16 2000 TFLOP/s" in r["hardware"] for r in rows)
    assert all(r["numbers"].endswith("what-if") and "what-if on measured kernels" in r["numbers_label"] for r in rows)
    rep = run("report", "rl-rollouts-64", "--out", tmp_path, "--no-plots", "--hbm-bandwidth", "5TB/s")
    assert rep.exit_code == 0 and "what-if, user-supplied: HBM 5TB/s" in (tmp_path / "report.md").read_text()
    chk = json.loads(run("check", "rl-rollouts-64", "--min-run-speedup", "1", "--l2", "1MB", "--json").stdout)
    assert "what-if" in json.dumps(chk)


@pytest.mark.parametrize("value", ["fast", "-1", "4.8 furlongs"])
def test_what_if_bad_number_is_one_line(value):
    res = run("estimate", "rl-rollouts-64", "--hbm-bandwidth", value)
    assert res.exit_code == 2 and res.output.startswith("error: --hbm-bandwidth") and len(res.output.splitlines()) == 1


def _examples():
    """Every `cascade-plan ...` example line in the commands' help, as a user would copy it."""
    import importlib
    import importlib.util
    import re
    import shlex

    from cascade_plan.cli.app import COMMANDS

    for name, module in COMMANDS:
        doc = getattr(importlib.import_module(module), name.replace("-", "_")).__doc__ or ""
        for line in doc.splitlines():
            m = re.match(r"\s*(?:Examples?:\s*)?cascade-plan (.*)$", line)
            # Left out: shell syntax, the GPU probe, analyze (its examples read the user's own log files) and
            # import-aic (it needs the `aic` extra and writes the package's calibration files).
            if not m or any(c in m.group(1) for c in "$>&") or name in ("probe", "analyze", "import-aic"):
                continue
            args = shlex.split(re.sub(r"\s{2,}\(.*\)\s*$", "", m.group(1)))
            if args[0] in ("report", "plot"):
                args += ["--no-plots"] if args[0] == "report" else ["--kind", "steps"]
            # aic-check runs AIConfigurator's own estimator: with the `aic` extra only (it says so without it)
            marks = [pytest.mark.skipif(importlib.util.find_spec("aiconfigurator_core") is None,
                                        reason="aic-check needs the aic extra (aiconfigurator-core)")] \
                if name == "aic-check" else []
            yield pytest.param(args, id=" ".join(args)[:60], marks=marks)


@pytest.mark.parametrize("args", list(_examples()))
def test_help_examples_run_from_an_empty_folder(args, tmp_path, monkeypatch):
    """Each example exits 0 and prints what help_example_outputs.py says it must (every example has an entry)."""
    from help_example_outputs import EXPECTED

    monkeypatch.chdir(tmp_path)
    res = run(*args)
    assert res.exit_code == 0, res.output
    key = " ".join(args)
    assert key in EXPECTED, f"no expected output for the example {key!r}: add one to help_example_outputs.py"
    EXPECTED[key](res.stdout)


def test_every_expected_output_is_an_example():
    from help_example_outputs import EXPECTED

    examples = {" ".join(p.values[0]) for p in _examples()}
    assert set(EXPECTED) == examples
