"""One vocabulary across the planner and the probe: no two classes share a name, and the attention backends the
probe times are the ones the planner fits (both spell them alike)."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _class_names(source: str) -> list[str]:
    return [n.name for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ClassDef)]


def _sources() -> list[Path]:
    return sorted((ROOT / "cascade_plan").rglob("*.py")) + sorted((ROOT / "kernels_probe").rglob("*.py"))


def duplicated_classes(paths, root: Path = ROOT) -> dict[str, list[str]]:
    where: dict[str, list[str]] = defaultdict(list)
    for path in paths:
        for name in _class_names(path.read_text(encoding="utf-8")):
            where[name].append(str(path.relative_to(root)))
    return {name: files for name, files in where.items() if len(files) > 1}


def test_no_two_classes_share_a_name():
    assert duplicated_classes(_sources()) == {}


def test_the_duplicate_check_can_fail(tmp_path):
    names = [f"{stem}.py" for stem in ("first", "second")]
    for name in names:
        (tmp_path / name).write_text("class Verdict:\n    pass\n", encoding="utf-8")
    assert duplicated_classes(sorted(tmp_path.glob("*.py")), root=tmp_path) == {"Verdict": names}


def test_the_probe_times_the_backends_the_planner_fits():
    from cascade_plan.calibration.backends import BACKENDS
    from kernels_probe.attention.grid import BACKENDS as PROBED

    assert sorted(PROBED) == sorted(BACKENDS)


def test_every_probe_backend_module_hands_the_runner_its_kernels():
    import importlib.util

    from kernels_probe.attention.grid import BACKEND_MODULES, BACKENDS

    assert set(BACKEND_MODULES) <= set(BACKENDS)
    for module in BACKEND_MODULES.values():
        spec = importlib.util.find_spec(module)
        assert spec is not None and spec.origin is not None
        source = open(spec.origin, encoding="utf-8").read()
        assert "def timed_kernels(data" in source, module


def private_imports(paths) -> list[str]:
    """`from first_party.module import _name`: a name its module keeps to itself, taken by another."""
    found = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in ("cascade_plan",
                                                                                          "kernels_probe"):
                found += [f"{path.name}:{node.lineno} {node.module}.{a.name}" for a in node.names
                          if a.name.startswith("_") and not a.name.startswith("__")]
    return found


def test_no_module_imports_another_modules_private_names(tmp_path):
    assert private_imports(_sources()) == []
    stem = "planted"
    planted = tmp_path / f"{stem}.py"
    planted.write_text("from cascade_plan.outputs import _hidden\n", encoding="utf-8")
    assert private_imports([planted]) == [f"{planted.name}:1 cascade_plan.outputs._hidden"]
