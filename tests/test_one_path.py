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


def _report_rows(md: str) -> dict[str, tuple[str, str]]:
    section = md.split("### Across GPUs", 1)[1].split("###", 1)[0]
    rows = re.findall(r"^\| (\S+) \| (\S+) \|.*\| ([^|]+) \|$", section, flags=re.M)
    return {gpu: (numbers, cell) for gpu, numbers, cell in rows if gpu not in ("GPU", "---")}


def _cell(doc: dict) -> str:
    """The report's speedup cell for one `estimate --json` answer."""
    if not doc["memory"]["fits"]:
        return "does not fit"
    rng = doc["go_no_go"]["speedup_range"]
    tag = "uncalibrated" if doc["go_no_go"]["basis"] == "default" else "extrapolated"
    return f"{rng[0]:.2f}x to {rng[1]:.2f}x ({tag})" if rng else f"{doc['run']['speedup']:.2f}x"


@pytest.mark.slow       # every shipped workload x every GPU, three commands each
@pytest.mark.parametrize("workload", WORKLOADS, ids=lambda p: p.stem)
def test_estimate_compare_and_report_agree_on_every_gpu(workload, tmp_path):
    gpus = ",".join(GPUS)
    est = {}
    for gpu in GPUS:
        doc = json.loads(_ok(["estimate", workload, "--hardware", gpu, "--json"]))
        est[gpu] = (doc["calibration"]["numbers"], doc["run"]["speedup"], doc["go_no_go"]["level"],
                    doc["go_no_go"]["speedup_range"], _cell(doc))
    cmp_doc = json.loads(_ok(["compare", workload, "--hardware", gpus, "--json"]))
    cmp = {r["hardware"]: r for r in cmp_doc["rows"]}
    _ok(["report", workload, "--no-plots", "--compare-hardware", gpus, "--out", tmp_path])
    rep = _report_rows((tmp_path / "report.md").read_text())
    assert set(cmp) == set(rep) == set(GPUS)
    for gpu in GPUS:
        numbers, speedup, level, rng, cell = est[gpu]
        assert cmp[gpu]["numbers"] == numbers == rep[gpu][0], gpu
        assert cmp[gpu]["run_speedup"] == pytest.approx(speedup, rel=1e-12), gpu
        assert cmp[gpu]["verdict"] == level and cmp[gpu]["speedup_range"] == rng, gpu
        assert rep[gpu][1] == cell, gpu
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
