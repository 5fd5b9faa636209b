"""Which files a log argument names (paths or globs), their format by suffix, and their form."""

from __future__ import annotations

import glob
from dataclasses import dataclass
from pathlib import Path

from cascade_plan.errors import InputError

COMPRESSIONS = (".gz", ".zst")
FORMATS = {".jsonl": "json", ".ndjson": "json", ".json": "json", ".csv": "csv", ".parquet": "parquet"}


@dataclass(frozen=True)
class LogFile:
    path: str
    fmt: str          # json | csv | parquet
    compression: str  # "" | gzip | zstd


def file_format(path: str) -> tuple[str, str]:
    name = path.lower()
    compression = ""
    for suf, comp in ((".gz", "gzip"), (".zst", "zstd")):
        if name.endswith(suf):
            name, compression = name[: -len(suf)], comp
    for suf, fmt in FORMATS.items():
        if name.endswith(suf):
            return fmt, compression
    raise InputError("unknown log format: name it .jsonl, .csv or .parquet (optionally .gz or .zst)", file=path)


def expand(patterns: list[str]) -> list[LogFile]:
    """Paths and globs (`logs/*.jsonl.zst`, `day/**/*.parquet`) to files, each named once, sorted.
    URLs pass through unchecked (Spark reads them)."""
    seen: dict[str, None] = {}
    for pat in patterns:
        pat = str(pat)
        if "://" in pat:                  # hdfs://, s3a://: the engine lists and reads them
            seen.setdefault(pat)
            continue
        hits = sorted(glob.glob(pat, recursive=True)) if glob.has_magic(pat) else [pat]
        if not hits:
            raise InputError("no file matches this pattern", file=pat)
        for h in hits:
            if not Path(h).is_file():
                raise InputError("no such log file" if not Path(h).exists() else "not a file", file=h)
            seen.setdefault(h)
    return [LogFile(p, *file_format(p)) for p in seen]
