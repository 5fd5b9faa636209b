"""Packaging: the test extra resolves on a plain index as well as here, and CI runs the README's command."""

import re
import tomllib


def _test_extra(root) -> list[str]:
    return tomllib.loads((root / "pyproject.toml").read_text())["project"]["optional-dependencies"]["test"]


def test_test_extra_leaves_triton_to_torch(root):
    # torch 2.13.0's CUDA build (what a plain index serves) requires one exact triton release; an exact pin of
    # triton here made `pip install '.[test]'` unresolvable there (ResolutionImpossible).
    extra = {re.split(r"[<>=!~ ;\[]", r, maxsplit=1)[0]: r for r in _test_extra(root)}
    assert extra["torch"] == "torch==2.13.0"          # the CPU build on local disk; pip prefers its +cpu wheel
    assert "==" not in extra["triton"] and ">=3.6" in extra["triton"]
    assert "3.7.1" in _spec_range(extra["triton"]) and "3.9.0" in _spec_range(extra["triton"])


def _spec_range(req: str):
    from packaging.requirements import Requirement

    return Requirement(req).specifier


def test_ci_runs_exactly_the_readme_test_command(root):
    readme_cmds = re.findall(r"^(python3 -m pip install -q '\.\[test\]'.*)$", (root / "README.md").read_text(), re.M)
    assert len(readme_cmds) == 1
    ci_lines = [line.strip() for line in (root / ".ci/run").read_text().splitlines()
                if line.strip() and not line.lstrip().startswith("#")]
    assert ci_lines[-1] == readme_cmds[0]


def test_every_imported_third_party_package_is_a_dependency(root):
    # pandas was a required dependency that nothing imported; the reverse mistake breaks a plain install.
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    name = lambda req: re.split(r"[<>=!~ ;\[]", req, maxsplit=1)[0].lower()
    core = {name(d) for d in project["dependencies"]}
    extras = {e: {name(d) for d in deps} for e, deps in project["optional-dependencies"].items()}
    importers: dict[str, set[str]] = {}
    for path in (root / "cascade_plan").rglob("*.py"):
        for pkg in re.findall(r"^\s*(?:import|from) (pandas|matplotlib|msgspec|numpy|rich|typer|yaml|scipy|duckdb)\b",
                              path.read_text(), re.M):
            importers.setdefault("pyyaml" if pkg == "yaml" else pkg, set()).add(path.name)
    for pkg, files in importers.items():
        assert pkg in core or any(pkg in deps for deps in extras.values()), (pkg, files)
    # pandas only serves the Spark job (the `spark` extra); a plain install does not need it.
    assert importers.get("pandas", set()) <= {"spark_job.py"} and "pandas" not in core and "pandas" in extras["spark"]
