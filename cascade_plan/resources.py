"""Where the built-in data lives: inside the installed package (wheel), or beside it in a checkout."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

_PKG = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    """`hardware_profiles`, `workloads` or `calibrations`: the wheel ships them under cascade_plan/_data;
    a source checkout (editable install, tests) has them at the repository root."""
    for candidate in (_PKG / "_data" / name, _PKG.parent / name):
        if candidate.is_dir():
            return candidate
    return _PKG / "_data" / name


def data_files(name: str, prefix: str, suffix: str) -> list[Path]:
    """The files of data folder `name` called <prefix>*<suffix>, sorted: glob's answer, from one listing of
    the folder per process while it is unchanged. A glob per GPU id compiled a pattern each, ~1 ms apiece of
    `estimate`'s start-up where the verdict looks up every GPU's shipped calibration."""
    d = data_dir(name)
    try:
        names = _listing(str(d), d.stat().st_mtime_ns)
    except OSError:
        return []
    return [d / n for n in names if n.startswith(prefix) and n.endswith(suffix) and len(n) >= len(prefix) + len(suffix)]


@lru_cache(maxsize=8)
def _listing(folder: str, mtime_ns: int) -> tuple[str, ...]:
    return tuple(sorted(os.listdir(folder)))
