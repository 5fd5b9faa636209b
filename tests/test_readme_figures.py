"""The README's figures are what the tool prints today (scripts/readme_figures.py computes them; fix a
drift with `python scripts/readme_figures.py --write`), and its CI snippet runs as written on a laptop."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("readme_figures", ROOT / "scripts" / "readme_figures.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_readme_figures_are_what_the_tool_prints():
    mod = _script()
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    figs = mod.figures()
    marked = {m.group("name") for m in mod.MARK.finditer(text)}
    assert marked == set(figs), "every figure the script computes is marked in the README, and only those"
    assert mod.render(text, figs) == text, "README figures drifted: run python scripts/readme_figures.py --write"


def test_render_rewrites_only_marked_spans():
    mod = _script()
    assert mod.render("a <!--fig:x-->1<!--/fig--> b 1", {"x": "2"}) == "a <!--fig:x-->2<!--/fig--> b 1"
    with pytest.raises(KeyError):
        mod.render("<!--fig:y-->1<!--/fig-->", {"x": "2"})


def _ci_command() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split("## CI capacity gate", 1)[1].split("```yaml", 1)[1].split("```", 1)[0]
    folded = block.split("- run: >", 1)[1]
    return " ".join(line.strip() for line in folded.strip().splitlines())


def test_ci_snippet_runs_as_written_on_a_laptop(tmp_path):
    command = _ci_command()
    assert command.startswith("cascade-plan check workloads/*.yaml") and '"$GITHUB_STEP_SUMMARY"' in command
    shutil.copytree(ROOT / "workloads", tmp_path / "workloads")
    env = {k: v for k, v in os.environ.items() if k != "GITHUB_STEP_SUMMARY"}
    env["PYTHONPATH"] = str(ROOT)
    shim = f'cascade-plan() {{ "{sys.executable}" -m cascade_plan "$@"; }}; '
    r = subprocess.run(["bash", "-c", shim + command], check=False, cwd=tmp_path, env=env, capture_output=True,
                       text=True,
                       timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "note: --markdown is empty" in r.stderr and "error" not in r.stderr
    assert (tmp_path / "capacity.xml").is_file() and re.search(r"\d+ passed, 0 failed", r.stdout)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["capacity.xml", "workloads"]   # nothing else written
