"""What the CLI reproducer tests share: the repository's data files, a runner, and the contract's check
that a refusal is one line on stderr with exit 2 and no traceback."""

import json
import os
from pathlib import Path

from typer.testing import CliRunner

from cascade_plan.cli.app import app

ROOT = Path(__file__).resolve().parent.parent
GOOD = ROOT / "workloads" / "rl-rollouts-64.yaml"
AIC_H100 = ROOT / "calibrations" / "h100-sxm-aic-vllm.json"
PROBE_H200 = ROOT / "calibrations" / "h200-probe-2026-12-01.json"
TINY = ROOT / "tests" / "data" / "tiny-gqa-config.json"
runner = CliRunner()
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


def estimate_json_and_text(*args) -> tuple[dict, str]:
    """`estimate ARGS --json` (exit 0) as data, and `estimate ARGS` (exit 0) as text, its words joined by single
    spaces (the table wraps at the terminal's width)."""
    res = run("estimate", *args, "--json")
    assert res.exit_code == 0, res.output
    text = run("estimate", *args)
    assert text.exit_code == 0, text.output
    return json.loads(res.stdout), " ".join(text.stdout.split())


def refused(res, *fragments):
    """Exit 2 with exactly one line on stderr that contains every fragment; no traceback."""
    assert res.exit_code == 2, (res.exit_code, res.output, res.exception)
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    for f in fragments:
        assert f in lines[0], (f, lines[0])
    return lines[0]


def tree_files(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): p.read_text() for p in sorted(folder.rglob("*")) if p.is_file()}
