"""The shipped workloads, found by name from any folder (`cascade-plan estimate rl-rollouts-64`)."""

from __future__ import annotations

from pathlib import Path

from cascade_plan.errors import InputError
from cascade_plan.inputs.ids import match_id, suggestion
from cascade_plan.inputs.yaml_source import check_reference
from cascade_plan.resources import data_dir


def builtin_workloads() -> dict[str, Path]:
    return {p.stem: p for p in sorted(data_dir("workloads").glob("*.yaml"))}


def resolve_workload(ref: Path | str) -> Path:
    """A file that exists wins; otherwise a bare name (any case, `.yaml` optional) of a shipped workload."""
    check_reference(str(ref), "workload")
    path = Path(ref)
    if path.exists() or len(path.parts) > 1:
        return path
    shipped = builtin_workloads()
    name = path.name[: -len(path.suffix)] if path.suffix in (".yaml", ".yml") else path.name
    found = match_id(name, shipped)
    if found:
        return shipped[found]
    raise InputError(f"workload file not found, and {name!r} is not a shipped workload{suggestion(name, shipped)}: "
                     f"use a path to a workload YAML or one of {', '.join(shipped)} (see `cascade-plan workloads`)",
                     file=str(ref))


def shipped_workload(name: str) -> Path:
    """The file of a shipped workload, by name only (any case, `.yaml` optional): never a path the user gives
    (`workloads --path /etc/passwd` would print any file's path as if it were a workload)."""
    shipped = builtin_workloads()
    text = str(name)
    if "/" in text or "\\" in text or "\0" in text:
        raise InputError(f"--path takes the name of a shipped workload, not a path: use one of {', '.join(shipped)}")
    stem = text[: -len(Path(text).suffix)] if Path(text).suffix in (".yaml", ".yml") else text
    found = match_id(stem, shipped)
    if not found:
        raise InputError(f"--path: {stem[:80]!r} is not a shipped workload{suggestion(stem, shipped)}: use one of "
                         f"{', '.join(shipped)}")
    return shipped[found]


def description(path: Path) -> str:
    """The comment block a workload file starts with, as one paragraph."""
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("#").strip())
    return " ".join(x for x in lines if x)
