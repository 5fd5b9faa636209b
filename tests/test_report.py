"""The markdown report: every section, images that exist, nothing written on bad input."""

import re

from typer.testing import CliRunner

from cascade_plan.cli.app import app

runner = CliRunner()

SECTIONS = ["# cascade-plan report", "## Summary", "### Inputs", "### The arithmetic", "### Decode steps",
            "### The whole run", "### Breakeven", "### Memory", "### Would the engine turn it on?", "**Verdict:**",
            "### Across GPUs", "### Plots", "## About these numbers"]


def test_report_has_every_section_and_its_images_exist(root, tmp_path):
    out = tmp_path / "report"
    res = runner.invoke(app, ["report", str(root / "workloads/rl-rollouts-64.yaml"),
                              str(root / "workloads/system-prompt-document-samples.yaml"), "--out", str(out),
                              "--compare-hardware", "h100-sxm,h200"])
    assert res.exit_code == 0, res.output
    md = (out / "report.md").read_text()
    for s in SECTIONS:
        assert s in md, s
    assert "cascade-plan 0.1.0" in md and "calibrated from AIConfigurator" in md
    assert "One token of KV costs 2 (K and V) x 32 layers x 8 KV heads per GPU x 128 x 2 bytes = **131,072 bytes**" in md
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md)
    assert len(images) == 8
    for img in images:
        p = out / img
        assert p.is_file() and p.stat().st_size > 10_000 and p.with_suffix(".svg").is_file()
    assert not list(out.rglob("*.tmp"))


def test_report_ideal_and_no_plots(root, tmp_path):
    res = runner.invoke(app, ["report", str(root / "workloads/rl-rollouts-64.yaml"), "--out", str(tmp_path),
                              "--ideal", "--no-plots", "--compare-hardware", ""])
    assert res.exit_code == 0, res.output
    md = (tmp_path / "report.md").read_text()
    assert "ideal (peak bandwidth" in md and "### Plots" not in md and "### Across GPUs" not in md
    assert "80 GiB" in md and "**17 GiB**" in md


def test_report_bad_input_writes_nothing(root, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("schema_version: 1\nmodel: llama-3-8b\ntree: {tokens: 1}\n")
    out = tmp_path / "out"
    res = runner.invoke(app, ["report", str(root / "workloads/rl-rollouts-64.yaml"), str(bad), "--out", str(out)])
    assert res.exit_code == 2 and "bad.yaml" in res.stderr
    assert not out.exists()
