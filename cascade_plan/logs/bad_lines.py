"""Where the malformed records are: file, line (or Parquet row) and the field at fault.

The DuckDB scan counts malformed records per file but cannot number lines; this pass re-reads only
the files that had some, in order, and checks each record with the format's own rules
(log_format.check_record), stopping after `limit` findings."""

from __future__ import annotations

import csv
import gzip
import io
from dataclasses import dataclass
from typing import Iterator

import msgspec

from cascade_plan.logs.log_format import check_record
from cascade_plan.logs.sources import LogFile


@dataclass(frozen=True)
class BadRecord:
    file: str
    line: int | None       # 1-based line (JSONL, CSV) or row (Parquet); None where it cannot be numbered
    reason: str            # "field: what is wrong"

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.reason}"


def _text(f: LogFile) -> io.TextIOBase | None:
    if f.compression == "gzip":
        return io.TextIOWrapper(gzip.open(f.path, "rb"), encoding="utf-8", errors="replace")
    if f.compression == "zstd":
        try:
            import zstandard
        except ImportError:
            return None
        return io.TextIOWrapper(zstandard.ZstdDecompressor().stream_reader(open(f.path, "rb")), encoding="utf-8",
                                errors="replace")
    return open(f.path, encoding="utf-8", errors="replace")


def _json_lines(f: LogFile, form: str) -> Iterator[BadRecord]:
    fh = _text(f)
    if fh is None:
        return
    dec = msgspec.json.Decoder()
    with fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rec = dec.decode(line)
            except msgspec.DecodeError as exc:
                yield BadRecord(f.path, n, f"not valid JSON ({exc})")
                continue
            reason = check_record(rec, form)
            if reason:
                yield BadRecord(f.path, n, reason)


def _csv_rows(f: LogFile, form: str) -> Iterator[BadRecord]:
    fh = _text(f)
    if fh is None:
        return
    with fh:
        reader = csv.DictReader(fh)
        for row in reader:
            reason = check_record(row, form, flat=True)
            if reason:
                yield BadRecord(f.path, reader.line_num, reason)


def _parquet_rows(f: LogFile, form: str) -> Iterator[BadRecord]:
    import duckdb

    con = duckdb.connect()
    cur = con.execute("SELECT * FROM read_parquet(?, file_row_number=true) ORDER BY file_row_number", [f.path])
    names = [d[0] for d in cur.description]
    while rows := cur.fetchmany(10_000):
        for row in rows:
            rec = dict(zip(names, row))
            n = rec.pop("file_row_number") + 1
            if isinstance(rec.get("levels"), list):
                rec["levels"] = "/".join(map(str, rec["levels"]))
            reason = check_record(rec, form, flat=True)
            if reason:
                yield BadRecord(f.path, n, reason)


def locate(f: LogFile, form: str, limit: int = 20) -> list[BadRecord]:
    """Up to `limit` malformed records of one file, in file order ([] where the file cannot be
    re-read here: zstd without the zstandard package)."""
    if "://" in f.path:
        return []
    it = {"json": _json_lines, "csv": _csv_rows, "parquet": _parquet_rows}[f.fmt](f, form)
    out = []
    for bad in it:
        out.append(bad)
        if len(out) >= limit:
            break
    return out
