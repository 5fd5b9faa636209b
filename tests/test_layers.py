"""The package's layering, read from the source with `ast` (imports inside functions count too).

Layers, lowest first: the top-level leaves (in their own order, TOP_LEVEL) < inputs < cost < engine <
calibration < planning < logs < serving < render < cli. A module may import its own layer and the layers below
it, never above, and the import graph has no cycle. No module imports the package root (it names the whole API, so it
sits above everything): the version is the leaf `cascade_plan.version`. `kernels_probe` (the
torch side) imports only leaf modules of `cascade_plan`, and only `cli/` imports `kernels_probe`.
`cascade_plan/__init__.py` is the front door: it names the library API lazily and sits outside the order.
"""

from __future__ import annotations

import ast
import sys
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("cascade_plan", "kernels_probe")
LAYERS = ("", "inputs", "cost", "engine", "calibration", "planning", "logs", "serving", "render", "cli")
MAX_LINES = 450
# The top-level modules, lowest first: each may import only those before it. A new one takes its place here.
# A top-level package (calibration_schema) is one entry: its modules import each other and what comes before it.
TOP_LEVEL = ("version", "errors", "units", "own_kernel_tune", "own_kernel_launch", "own_kernel_pages",
             "own_kernel_plan", "own_kernel_tunes", "own_kernel_blocks", "own_kernel_prefix", "resources", "gpus",
             "calibration_schema", "envelope", "outputs", "atomic", "report_folder")
# The numeric core renders nothing and needs no GPU stack: these never appear under cost/.
COST_BANNED = ("rich", "matplotlib", "xml", "torch", "triton", "pandas", "duckdb", "pyspark", "typer")
# The planner must run without the probe's extra.
PLANNER_BANNED = ("torch", "triton")


@cache
def modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _is_package(name: str) -> bool:
    return modules().get(name, Path()).name == "__init__.py"


def _resolve_relative(module: str, level: int, target: str | None) -> str:
    base = module.split(".")
    if not _is_package(module):
        base = base[:-1]
    base = base[: len(base) - (level - 1)] if level > 1 else base
    return ".".join(base + ([target] if target else []))


def _imports_of_source(source: str, name: str = "cascade_plan.cost.example") -> set[tuple[str, int]]:
    """(imported module, line) for every import in `source`, as module `name` would resolve them."""
    known = modules()
    found: set[tuple[str, int]] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            target = _resolve_relative(name, node.level, node.module) if node.level else node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.add((sub if sub in known else target, node.lineno))
    return found


@cache
def imports() -> dict[str, frozenset[tuple[str, int]]]:
    """Each module's imports of anything (first-party names resolved to modules), with line numbers."""
    return {name: frozenset(_imports_of_source(path.read_text(), name)) for name, path in modules().items()}


def first_party(name: str) -> bool:
    return name.split(".")[0] in PACKAGES


def layer_of(module: str) -> int:
    parts = module.split(".")
    if parts[0] != "cascade_plan":
        raise ValueError(module)
    if parts[1:] == ["__main__"]:
        return LAYERS.index("cli")
    if len(parts) >= 2 and parts[1] not in LAYERS:
        return 0
    return LAYERS.index(parts[1]) if len(parts) > 1 else -1


def edges() -> dict[str, set[str]]:
    return {
        name: {target for target, _ in found if first_party(target) and target in modules() and target != name}
        for name, found in imports().items()
    }


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative; returns the components of more than one module (the cycles)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    cycles: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        cycles.append(sorted(component))
    return cycles


def test_the_graph_is_read() -> None:
    graph = edges()
    # Anchors that must be seen, including one import made inside a function.
    assert "cascade_plan.cli.app" in graph and "cascade_plan.cost.estimate" in graph
    assert any(target.startswith("cascade_plan.") for target in graph["cascade_plan.cli.app"])
    assert strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_every_first_party_import_resolves() -> None:
    """Imports inside functions run only on the paths that reach them (a GPU's, for much of kernels_probe): each must
    name a module that exists, or the first run there fails."""
    missing = sorted(_where(name, target, line) for name, found in imports().items() for target, line in found
                     if first_party(target) and target not in modules())
    assert missing == []


def test_no_import_cycles() -> None:
    assert strongly_connected(edges()) == []


def _where(name: str, target: str, line: int) -> str:
    return f"{modules()[name].relative_to(ROOT)}:{line} imports {target}"


def violations(importer, rule) -> list[str]:
    """Every import of a module `importer(name)` accepts that breaks `rule(name, target)`."""
    return sorted(
        _where(name, target, line)
        for name, found in imports().items()
        if importer(name)
        for target, line in found
        if rule(name, target)
    )


def _planner_module(target: str) -> bool:
    return target.startswith("cascade_plan.") and target in modules()


def _top(target: str) -> str:
    return target.split(".")[0]


def test_imports_go_down_the_layers() -> None:
    assert violations(
        lambda name: name.startswith("cascade_plan."),
        lambda name, target: _planner_module(target) and layer_of(target) > layer_of(name),
    ) == []


def test_cost_is_a_pure_core() -> None:
    assert violations(
        lambda name: name.startswith("cascade_plan.cost"),
        lambda name, target: _top(target) in COST_BANNED
        or (_planner_module(target) and layer_of(target) > LAYERS.index("cost")),
    ) == []


def test_the_planner_needs_no_gpu_stack() -> None:
    assert violations(lambda name: _top(name) == "cascade_plan",
                      lambda name, target: _top(target) in PLANNER_BANNED) == []


def _leaf(module: str) -> bool:
    """A cascade_plan module that imports nothing of cascade_plan above the top-level leaves."""
    return all(layer_of(target) == 0 for target in edges()[module] if target.startswith("cascade_plan."))


def test_kernels_probe_imports_only_leaves() -> None:
    assert violations(
        lambda name: _top(name) == "kernels_probe",
        lambda name, target: _planner_module(target) and not _leaf(target),
    ) == []


def _top_level(module: str) -> str | None:
    """The TOP_LEVEL entry a module is or lies in (a top-level module, or a module of a top-level package)."""
    parts = module.split(".")
    return parts[1] if len(parts) >= 2 and parts[0] == "cascade_plan" and parts[1] not in LAYERS else None


def test_top_level_modules_are_ordered() -> None:
    found = {_top_level(name) for name in modules()} - {None, "__main__"}
    assert found == set(TOP_LEVEL), (found - set(TOP_LEVEL), set(TOP_LEVEL) - found)
    assert violations(
        lambda name: _top_level(name) in TOP_LEVEL,
        lambda name, target: _top_level_after(name, target),
    ) == []


def _top_level_after(name: str, target: str) -> bool:
    """`target` is a top-level entry that comes after `name`'s own."""
    mine, theirs = _top_level(name), _top_level(target)
    if mine not in TOP_LEVEL or theirs not in TOP_LEVEL:
        return False
    return TOP_LEVEL.index(theirs) > TOP_LEVEL.index(mine)      # one package's modules: the cycle test orders them


SCHEMA = "cascade_plan.calibration_schema"
# What the calibration schema may import beside itself: the probe reads and writes files with it, without the planner.
SCHEMA_THIRD_PARTY = ("msgspec",)


def _schema_breaks(target: str) -> bool:
    """An import that the calibration schema (a leaf package: kernels_probe imports it) may not make: anything of
    cascade_plan outside it and the top-level entries before it, any third-party package but msgspec."""
    if first_party(target):
        return not (target == SCHEMA or target.startswith(SCHEMA + ".") or
                    (_top_level(target) in TOP_LEVEL
                     and TOP_LEVEL.index(_top_level(target)) < TOP_LEVEL.index("calibration_schema")))  # type: ignore
    return _top(target) not in sys.stdlib_module_names and _top(target) not in SCHEMA_THIRD_PARTY


def test_the_calibration_schema_is_a_leaf_package() -> None:
    schema = [name for name in modules() if name.startswith(SCHEMA)]
    assert len(schema) > 5 and all(_leaf(name) for name in schema)
    assert violations(lambda name: name.startswith(SCHEMA), lambda name, target: _schema_breaks(target)) == []
    # the probe writes through it
    assert any(target.startswith(SCHEMA + ".") for target in edges()["kernels_probe.calibration_file"])


def test_the_schema_rule_catches_what_it_forbids() -> None:
    device = SCHEMA + ".device"
    bad = ("from cascade_plan.inputs.limits import MAX_HEADS\nimport numpy\nfrom cascade_plan.envelope import x\n"
           "from kernels_probe import PROBE_VERSION\n")
    good = "from typing import Any\nimport msgspec\nfrom cascade_plan.calibration_schema.quantities import Text\n"
    assert {t for t, _ in _imports_of_source(bad, device) if _schema_breaks(t)} == {
        "cascade_plan.inputs.limits", "numpy", "cascade_plan.envelope", "kernels_probe"}
    assert not any(_schema_breaks(t) for t, _ in _imports_of_source(good, device))
    assert not _leaf("cascade_plan.calibration.fitting")     # what kernels_probe may not import, for contrast


def test_nothing_imports_the_package_root() -> None:
    assert violations(lambda name: name.startswith("cascade_plan."),
                      lambda name, target: target == "cascade_plan") == []


def test_only_the_cli_imports_kernels_probe() -> None:
    assert violations(
        lambda name: _top(name) == "cascade_plan" and not name.startswith("cascade_plan.cli"),
        lambda name, target: _top(target) == "kernels_probe",
    ) == []


def test_the_rules_catch_what_they_forbid() -> None:
    # The layer order itself, on names: an upward pair and a downward pair.
    assert layer_of("cascade_plan.cost.estimate") < layer_of("cascade_plan.calibration.fitting")
    assert layer_of("cascade_plan.errors") == 0 and layer_of("cascade_plan.__main__") == LAYERS.index("cli")
    # A root import is seen as one (what the package-root rule judges), and top-level modules do import each other.
    assert _imports_of_source("from cascade_plan import __version__\n") == {("cascade_plan", 1)}
    assert violations(lambda name: _top_level(name) in TOP_LEVEL, lambda name, target: _top_level(target) is not None)
    # The cli imports below it, so the rule that forbids upward imports sees real edges to judge.
    assert violations(lambda name: name.startswith("cascade_plan.cli"),
                      lambda name, target: _planner_module(target) and layer_of(target) < layer_of(name))


@pytest.mark.parametrize("package", PACKAGES)
def test_no_module_is_too_long(package: str) -> None:
    long = {
        str(path.relative_to(ROOT)): lines
        for name, path in modules().items()
        if name.split(".")[0] == package and (lines := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}
