"""The report's header lists each kind of source once, and user-chosen names cannot break its tables."""

from pathlib import Path

from typer.testing import CliRunner

from cascade_plan.cli.app import app

ROOT = Path(__file__).resolve().parent.parent


def test_header_names_each_source_kind_once(tmp_path):
    res = CliRunner().invoke(app, ["report", "rl-rollouts-64", "parallel-sampling-n8", "--out", str(tmp_path / "r"),
                                   "--no-plots"])
    assert res.exit_code == 0, res.output
    text = (tmp_path / "r" / "report.md").read_text()
    header = text.split("## Summary")[0]
    bullets = [line for line in header.splitlines() if line.startswith("- **")]
    kinds = [b.split("**")[1] for b in bullets]
    assert len(kinds) == len(set(kinds)) and "probe" in kinds
    assert "`h200-probe-" in header


def test_pipe_in_workload_name_is_escaped(tmp_path):
    wl = (ROOT / "workloads" / "parallel-sampling-n8.yaml").read_text()
    assert "name: parallel-sampling-n8" in wl
    path = tmp_path / "w.yaml"
    path.write_text(wl.replace("name: parallel-sampling-n8", "name: 'a|b'"))
    res = CliRunner().invoke(app, ["report", str(path), "--out", str(tmp_path / "r"), "--no-plots"])
    assert res.exit_code == 0, res.output
    rows = [line for line in (tmp_path / "r" / "report.md").read_text().splitlines() if line.startswith("| [a")]
    assert rows and rows[0].startswith("| [a\\|b]")
