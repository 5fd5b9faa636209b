"""Where the built-in data lives: inside the installed package (wheel), or beside it in a checkout."""

from __future__ import annotations

from pathlib import Path

_PKG = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    """`hardware_profiles`, `workloads` or `calibrations`: the wheel ships them under cascade_plan/_data;
    a source checkout (editable install, tests) has them at the repository root."""
    for candidate in (_PKG / "_data" / name, _PKG.parent / name):
        if candidate.is_dir():
            return candidate
    return _PKG / "_data" / name
