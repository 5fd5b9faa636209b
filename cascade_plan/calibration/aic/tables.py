"""Find and read NVIDIA AIConfigurator's measured per-op tables (the `aic` extra).

AIConfigurator (`aiconfigurator-core`, Apache-2.0) ships parquet tables under
`aiconfigurator_core/systems/data/<system>/<op>/<framework>/<version>/<table>.parquet`. This module
only locates and reads them into numpy columns; the fits live in aic/fit.py. pyarrow is imported
inside the function that reads, so nothing here costs start-up time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cascade_plan.errors import InputError
from cascade_plan.gpus import GPUS

PACKAGE = "aiconfigurator-core"
FRAMEWORKS = ("vllm", "sglang", "trtllm")

# Our hardware profile id -> AIConfigurator's system folder (cascade_plan/gpus.py). Profiles it has no data for
# (A100-40GB, H100 PCIe, GH200, MI300X, RTX 4090) stay on the probe or the defaults.
AIC_SYSTEMS = {g.id: g.aic_system for g in GPUS if g.aic_system}
# The GPU whose probe calibration the cascade parts are transferred from.
REFERENCE_HW = "h200"

# The framework's own all-reduce table, else NCCL's (TensorRT-LLM names its custom one the same).
ALLREDUCE_TABLES = {"vllm": ("comm", "vllm", "custom_allreduce_perf"),
                    "sglang": ("comm", "sglang", "custom_allreduce_perf"),
                    "trtllm": ("comm", "trtllm", "custom_allreduce_perf")}
NCCL_TABLE = ("comm", "nccl", "nccl_perf")


@dataclass(frozen=True)
class Table:
    """One parquet table: where it lies (relative to the data folder), its runtime version, its columns."""

    name: str
    rel_path: str
    version: str
    columns: dict[str, np.ndarray]

    @property
    def rows(self) -> int:
        return len(next(iter(self.columns.values()))) if self.columns else 0


def data_root(explicit: Path | None = None) -> Path:
    """AIConfigurator's `systems/data` folder: the given one (tests, a checkout), else the installed package's."""
    if explicit is not None:
        root = Path(explicit)
        if not root.is_dir():
            raise InputError(f"--aic-data: {root} is not a folder")
        return root
    try:
        import aiconfigurator_core
    except ImportError:
        raise InputError("import-aic needs NVIDIA AIConfigurator's tables: pip install 'cascade-plan[aic]' "
                         f"(installs {PACKAGE}), or pass --aic-data FOLDER (its systems/data folder)") from None
    return Path(aiconfigurator_core.__file__).parent / "systems" / "data"


def package_version(explicit_root: Path | None) -> str:
    """The aiconfigurator-core version the tables came from ("unversioned folder" for --aic-data)."""
    if explicit_root is not None:
        return "unversioned folder"
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(PACKAGE)
    except PackageNotFoundError:
        return "unknown"


def _version_key(v: str) -> tuple:
    return tuple(int(x) for x in re.findall(r"\d+", v)) or (0,)


def find_table(root: Path, system: str, op: str, framework: str, table: str) -> Path | None:
    """The newest runtime version's copy of one table, or None."""
    base = root / system / op / framework
    found = [p for p in base.glob(f"*/{table}.parquet")] if base.is_dir() else []
    return max(found, key=lambda p: _version_key(p.parent.name)) if found else None


# Columns older tables lack, with the value they imply (A100's vLLM 0.14 tables have no sliding window).
OPTIONAL_COLUMNS = {"window_size": 0, "beam_width": 1, "allreduce_dtype": "bfloat16"}


def read_table(root: Path, path: Path, columns: list[str]) -> Table:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise InputError("reading AIConfigurator's parquet tables needs pyarrow: pip install "
                         "'cascade-plan[aic]'") from None
    try:
        tab = pq.read_table(path)
    except (OSError, ValueError) as exc:      # pyarrow's ArrowInvalid is a ValueError
        raise InputError(f"cannot read AIConfigurator table: {exc}", file=str(path)) from None
    have = set(tab.column_names)
    missing = [c for c in columns if c not in have and c not in OPTIONAL_COLUMNS]
    if missing:
        raise InputError(f"AIConfigurator table lacks column(s) {', '.join(missing)}", file=str(path))
    cols = {}
    for c in columns:
        if c not in have:
            cols[c] = np.full(tab.num_rows, OPTIONAL_COLUMNS[c])
            continue
        col = tab.column(c).to_numpy(zero_copy_only=False)
        cols[c] = col.astype(str) if col.dtype == object else col
    return Table(name=path.stem, rel_path=str(path.relative_to(root)), version=path.parent.name, columns=cols)


def load(root: Path, system: str, op: str, framework: str, table: str, columns: list[str]) -> Table | None:
    path = find_table(root, system, op, framework, table)
    return read_table(root, path, columns) if path else None
