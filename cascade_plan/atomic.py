"""Write files atomically: a temporary file in the same folder, flushed to disk, then a rename.
A crash or Ctrl-C leaves the old file (or none), never half a file; a later write of the same file
removes the temporary files a killed run left (see outputs.py). A file that cannot be written is
bad input (InputError: one line, exit 2), not a traceback."""

from __future__ import annotations

from pathlib import Path


def write_bytes_atomic(path: Path, data: bytes) -> Path:
    from cascade_plan.outputs import write_files_together

    return write_files_together([(Path(path), data)])[0]


def write_text_atomic(path: Path, text: str) -> Path:
    return write_bytes_atomic(path, text.encode("utf-8"))
