"""Which files a log argument names (paths or globs), their format by suffix, and their form."""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from pathlib import Path

from cascade_plan.errors import InputError

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
    files = [LogFile(p, *file_format(p)) for p in seen]
    for f in files:
        if f.compression == "zstd" and "://" not in f.path:
            check_zstd_complete(f.path)
    return files


_ZSTD_MAGIC = 0xFD2FB528


def check_zstd_complete(path: str) -> None:
    """Refuse a .zst file that ends inside a frame (a copy cut short): DuckDB reads such a file up to the cut
    without a word, where a cut .gz is an error. Walks the frame and block headers only (3 bytes per block
    of at most 128 KiB), so it costs a few seeks, not a decompression."""
    size = os.path.getsize(path)

    def cut() -> InputError:
        return InputError("cannot read this log: the zstd file is truncated (it ends inside a compressed frame): the "
                          "copy was cut short; "
                          "fetch it again", file=path)

    with open(path, "rb") as fh:
        pos = 0
        while pos < size:
            fh.seek(pos)
            head = fh.read(4)
            if len(head) < 4:
                raise cut()
            magic = int.from_bytes(head, "little")
            if 0x184D2A50 <= magic <= 0x184D2A5F:            # skippable frame: 4-byte size, then that many bytes
                n = fh.read(4)
                if len(n) < 4:
                    raise cut()
                pos += 8 + int.from_bytes(n, "little")
                if pos > size:
                    raise cut()
                continue
            if magic != _ZSTD_MAGIC:
                raise InputError("cannot read this log: not a zstd file (or damaged: no zstd frame where one "
                                 "should start)",
                                 file=path)
            d = fh.read(1)
            if not d:
                raise cut()
            fhd = d[0]
            fcs_flag, single, checksum, dict_flag = fhd >> 6, (fhd >> 5) & 1, (fhd >> 2) & 1, fhd & 3
            header = 1 + (0 if single else 1) + (0, 1, 2, 4)[dict_flag] + ((1 if single else 0), 2, 4, 8)[fcs_flag]
            pos += 4 + header
            while True:
                fh.seek(pos)
                b = fh.read(3)
                if len(b) < 3:
                    raise cut()
                bh = int.from_bytes(b, "little")
                last, kind, bsize = bh & 1, (bh >> 1) & 3, bh >> 3
                if kind == 3:
                    raise InputError("cannot read this log: damaged zstd file (a block of the reserved type)",
                                     file=path)
                pos += 3 + (1 if kind == 1 else bsize)
                if pos > size:
                    raise cut()
                if last:
                    break
            pos += 4 if checksum else 0
            if pos > size:
                raise cut()
