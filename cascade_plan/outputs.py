"""Where commands write: output paths checked before any work, several files replaced together,
report folders built aside and swapped in whole, and temporary files of killed runs cleaned up.

Temporary names carry the writer's process id (`.NAME.PID.XXXX.tmp`), so a later run can tell a
dead writer's leftovers (removed) from a live one's (left alone)."""

from __future__ import annotations

import errno
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

from cascade_plan.errors import InputError

# Temporary files and folders this package writes: .NAME.PID.RANDOM.tmp (file), .NAME.PID.RANDOM.tmpdir,
# .NAME.PID.RANDOM.old (a report folder being swapped out).
_TEMP = re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)\.[^.]+\.(tmp|tmpdir|old)$")
# Written by earlier versions (no pid): removed once older than this.
_LEGACY_TEMP = re.compile(r"^\..+\.[A-Za-z0-9_]{8}\.tmp$")
LEGACY_AGE_S = 600.0
REPORT_MARKER = ".cascade-plan-report"
REPORT_FILES = re.compile(r".*\.(md|png|svg)$")


def _reason(exc: OSError) -> str:
    return exc.strerror or exc.__class__.__name__


def _existing_ancestor(path: Path) -> Path:
    p = path.absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def check_output_file(path: Path, option: str) -> Path:
    """`path` can be written as a file: not a folder, under a writable folder (or one that can be made)."""
    path = Path(path)
    if "\0" in str(path):
        raise InputError(f"{option}: not a valid path")
    if path.is_dir():
        raise InputError(f"{option}: {path} is a folder; give a file name")
    base = _existing_ancestor(path.parent)
    if not base.is_dir():
        raise InputError(f"{option}: cannot write {path}: {base} is a file, not a folder")
    if not os.access(base, os.W_OK | os.X_OK):
        raise InputError(f"{option}: cannot write {path}: {base} is not writable")
    if path.exists() and not os.access(path, os.W_OK) and not os.access(path.parent, os.W_OK):
        raise InputError(f"{option}: cannot write {path}: permission denied")
    return path


def check_output_dir(path: Path, option: str) -> Path:
    """`path` can hold output files: a folder (or creatable as one) that is writable."""
    path = Path(path)
    if "\0" in str(path):
        raise InputError(f"{option}: not a valid path")
    if path.exists() and not path.is_dir():
        raise InputError(f"{option}: {path} is a file; give a folder")
    base = _existing_ancestor(path)
    if not base.is_dir():
        raise InputError(f"{option}: cannot write into {path}: {base} is a file, not a folder")
    if not os.access(base, os.W_OK | os.X_OK):
        raise InputError(f"{option}: cannot write into {path}: {base} is not writable")
    return path


def temp_name(path: Path) -> str:
    return f".{Path(path).name}.{os.getpid()}."


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True          # exists, owned by someone else
    return True


def clean_stale_temps(folder: Path, name: str | None = None) -> list[Path]:
    """Remove temporary files and folders that killed runs left in `folder` (those of `name` only,
    when given): their writer's process is gone, or (older versions, no pid) they are old."""
    removed = []
    try:
        entries = list(Path(folder).iterdir())
    except OSError:
        return removed
    now = time.time()
    for entry in entries:
        m = _TEMP.match(entry.name)
        if m:
            if (name is not None and m.group("name") != name) or _pid_alive(int(m.group("pid"))):
                continue
        elif _LEGACY_TEMP.match(entry.name) and (name is None or entry.name.startswith(f".{name}.")):
            try:
                if now - entry.stat().st_mtime < LEGACY_AGE_S:
                    continue
            except OSError:
                continue
        else:
            continue
        try:
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
            removed.append(entry)
        except OSError:
            pass
    return removed


def write_files_together(files: list[tuple[Path, bytes]]) -> list[Path]:
    """Write every file to a temporary beside it first, then rename them all into place: a failure
    before the renames leaves none of them changed."""
    temps: list[tuple[str, Path]] = []
    try:
        for path, data in files:
            path = Path(path)
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                clean_stale_temps(path.parent, path.name)
                fd, tmp = tempfile.mkstemp(prefix=temp_name(path), suffix=".tmp", dir=path.parent)
                temps.append((tmp, path))
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
                    fh.flush()
                    os.fsync(fh.fileno())
                os.chmod(tmp, 0o666 & ~current_umask())
            except OSError as exc:
                raise InputError(f"cannot write {path}: {_reason(exc)}") from None
        for tmp, path in temps:
            try:
                os.replace(tmp, path)
            except OSError as exc:
                raise InputError(f"cannot write {path}: {_reason(exc)}") from None
    finally:
        for tmp, _ in temps:
            Path(tmp).unlink(missing_ok=True)
    return [Path(p) for p, _ in files]


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _looks_like_report(folder: Path) -> bool:
    """A folder a report may replace: ours (marker), empty, or only markdown and images."""
    if (folder / REPORT_MARKER).exists():
        return True
    try:
        for root, dirs, files in os.walk(folder):
            if any(not REPORT_FILES.match(f) for f in files):
                return False
    except OSError:
        return False
    return True


class ReportFolder:
    """Build a report in a temporary folder beside `out`, then swap it in whole:

        with ReportFolder(out) as tmp:
            ... write into tmp ...
        # out now holds exactly what was written; the previous report is gone

    An exception inside the block removes the temporary folder and leaves `out` as it was."""

    def __init__(self, out: Path, option: str = "--out") -> None:
        self.out = Path(out)
        check_output_dir(self.out, option)
        if self.out.exists() and not _looks_like_report(self.out):
            raise InputError(f"{option}: {self.out} holds files that are not a cascade-plan report; give a new or "
                             "empty folder (a report replaces its folder whole)")
        self.tmp: Path | None = None

    def __enter__(self) -> Path:
        parent = self.out.absolute().parent
        try:
            parent.mkdir(parents=True, exist_ok=True)
            clean_stale_temps(parent, self.out.absolute().name)
            self.tmp = Path(tempfile.mkdtemp(prefix=temp_name(self.out.absolute()), suffix=".tmpdir", dir=parent))
            os.chmod(self.tmp, 0o777 & ~current_umask())      # mkdtemp makes 0700; a report folder is an ordinary one
            (self.tmp / REPORT_MARKER).write_text("written by cascade-plan report; the folder is replaced whole\n")
        except OSError as exc:
            raise InputError(f"cannot write into {self.out}: {_reason(exc)}") from None
        return self.tmp

    def __exit__(self, exc_type, exc, tb) -> None:
        assert self.tmp is not None
        if exc_type is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            return
        out = self.out.absolute()
        olds: list[Path] = []
        try:
            # Move the previous report aside and ours in. Another run swapping the same folder at the
            # same moment can win a rename; then try again: `out` always holds one run's whole report.
            for _ in range(50):
                if out.exists():
                    old = Path(tempfile.mkdtemp(prefix=temp_name(out), suffix=".old", dir=out.parent))
                    os.rmdir(old)
                    try:
                        os.rename(out, old)
                        olds.append(old)
                    except FileNotFoundError:
                        pass
                try:
                    os.rename(self.tmp, out)
                    break
                except OSError as exc:
                    if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                        raise
            else:
                raise OSError(errno.EBUSY, "other runs keep replacing it")
        except OSError as exc:
            if olds and not out.exists():
                os.rename(olds.pop(), out)          # put the previous report back
            shutil.rmtree(self.tmp, ignore_errors=True)
            raise InputError(f"cannot write into {self.out}: {_reason(exc)}") from None
        finally:
            for old in olds:
                shutil.rmtree(old, ignore_errors=True)
