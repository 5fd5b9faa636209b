"""One answer per question: for every shipped workload and every built-in GPU, `estimate --json`,
`compare --json` and the report's across-GPU table give the same run speedup from the same source."""

import json
import re

import pytest
from typer.testing import CliRunner

from cascade_plan.cli.app import app
from cascade_plan.inputs.hardware import builtin_hardware_ids
from cascade_plan.resources import data_dir

runner = CliRunner()
WORKLOADS = sorted(data_dir("workloads").glob("*.yaml"))
GPUS = builtin_hardware_ids()


def _ok(args):
    res = runner.invoke(app, [str(a) for a in args])
    assert res.exit_code == 0, res.output
    return res.stdout


def _report_rows(md: str) -> dict[str, tuple[str, float]]:
    section = md.split("### Across GPUs", 1)[1].split("###", 1)[0]
    rows = re.findall(r"^\| (\S+) \| (\S+) \|.*\| ([0-9.]+)x \|$", section, flags=re.M)
    return {gpu: (numbers, float(sp)) for gpu, numbers, sp in rows}


@pytest.mark.parametrize("workload", WORKLOADS, ids=lambda p: p.stem)
def test_estimate_compare_and_report_agree_on_every_gpu(workload, tmp_path):
    gpus = ",".join(GPUS)
    est = {}
    for gpu in GPUS:
        doc = json.loads(_ok(["estimate", workload, "--hardware", gpu, "--json"]))
        est[gpu] = (doc["calibration"]["numbers"], doc["run"]["speedup"])
    cmp_doc = json.loads(_ok(["compare", workload, "--hardware", gpus, "--json"]))
    cmp = {r["hardware"]: (r["numbers"], r["run_speedup"]) for r in cmp_doc["rows"]}
    _ok(["report", workload, "--no-plots", "--compare-hardware", gpus, "--out", tmp_path])
    rep = _report_rows((tmp_path / "report.md").read_text())
    assert set(cmp) == set(rep) == set(GPUS)
    for gpu in GPUS:
        assert cmp[gpu][0] == est[gpu][0] == rep[gpu][0], gpu
        assert cmp[gpu][1] == pytest.approx(est[gpu][1], rel=1e-12), gpu
        assert f"{rep[gpu][1]:.2f}" == f"{est[gpu][1]:.2f}", gpu
    # mixed sources are said so
    if len({v[0] for v in est.values()}) > 1:
        assert cmp_doc["sources_note"] and "numbers differ by GPU" in cmp_doc["sources_note"]
        assert "**Mixed sources:**" in (tmp_path / "report.md").read_text()


def test_an_uncalibrated_workload_gpu_does_not_force_defaults_on_the_others(root, tmp_path):
    # rl-rollouts-64 asks for --uncalibrated on its own GPU only through the flag, never implicitly: with no
    # flag every GPU gets its own best source, whatever the workload's GPU has.
    wl = root / "workloads/rl-rollouts-64.yaml"
    _ok(["report", wl, "--hardware", "mi300x", "--no-plots", "--compare-hardware", "mi300x,h200", "--out", tmp_path])
    rows = _report_rows((tmp_path / "report.md").read_text())
    assert rows["mi300x"][0] == "default" and rows["h200"][0] == "probe/flashinfer"
    _ok(["report", wl, "--uncalibrated", "--no-plots", "--compare-hardware", "h200", "--out", tmp_path])
    assert _report_rows((tmp_path / "report.md").read_text())["h200"][0] == "default"
