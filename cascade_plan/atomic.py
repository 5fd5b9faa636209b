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


class open_atomic:
    """`with open_atomic(path, "wb") as fh:` streams a large file into a temporary file beside
    `path` and renames it into place only when the block completes; an exception leaves no file.
    Temporary names carry the pid, so a later write removes a killed run's leftovers (outputs.py)."""

    def __init__(self, path: Path, mode: str = "wb") -> None:
        self.path = Path(path)
        self.mode = mode

    def __enter__(self):
        import os
        import tempfile

        from cascade_plan.errors import InputError
        from cascade_plan.outputs import clean_stale_temps, lock_file, temp_name

        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            clean_stale_temps(self.path.parent, self.path.name)
            fd, self.tmp = tempfile.mkstemp(prefix=temp_name(self.path), suffix=".tmp", dir=self.path.parent)
            lock_file(fd)              # held while the file is written: a cleaner never removes a live write
        except OSError as exc:
            raise InputError(f"cannot write {self.path}: {exc.strerror or exc}") from None
        self.fh = os.fdopen(fd, self.mode)
        return self.fh

    def __exit__(self, exc_type, exc, tb) -> None:
        import os

        from cascade_plan.outputs import current_umask

        try:
            if exc_type is None:
                self.fh.flush()
                os.fsync(self.fh.fileno())
            self.fh.close()
            if exc_type is None:
                os.chmod(self.tmp, 0o666 & ~current_umask())
                os.replace(self.tmp, self.path)
        except OSError as exc:
            from cascade_plan.errors import InputError

            raise InputError(f"cannot write {self.path}: {exc.strerror or exc}") from None
        finally:
            Path(self.tmp).unlink(missing_ok=True)
