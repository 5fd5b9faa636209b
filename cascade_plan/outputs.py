"""Where commands write: output paths checked before any work, several files replaced together,
report folders built aside and swapped in whole, and temporary files of killed runs cleaned up.

Temporary names carry the writer's process id (`.NAME.PID.XXXX.tmp`) and the writer holds an
advisory lock on the open file while it writes, so a later run can tell a dead writer's leftovers
(removed: unlocked, and their process gone or a zombie) from a live one's (left alone).
Report folders (replaced whole, only when this tool wrote them): report_folder.py."""

from __future__ import annotations

import hashlib
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
NAME_MAX_BYTES = 255                  # one path component (ext4, xfs, btrfs, APFS, NTFS)
PATH_MAX_BYTES = 4096
TEMP_STEM_BYTES = 96                  # the output's name inside a temporary name: the rest fits in 255


def os_reason(exc: OSError) -> str:
    return exc.strerror or exc.__class__.__name__


def _existing_ancestor(path: Path) -> Path:
    p = path.absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def _check_path_text(path: Path, option: str) -> None:
    text = str(path)
    if "\0" in text:
        raise InputError(f"{option}: not a valid path")
    try:
        encoded = os.fsencode(text)
    except UnicodeError:
        raise InputError(f"{option}: not a valid path (cannot be encoded for this file system)") from None
    if len(encoded) > PATH_MAX_BYTES:
        raise InputError(f"{option}: the path is {len(encoded):,} bytes; the most a path can be is {PATH_MAX_BYTES:,}")
    for part in Path(text).parts:
        n = len(os.fsencode(part))
        if n > NAME_MAX_BYTES:
            raise InputError(f"{option}: the name {part[:40]!r}... is {n} bytes; a file or folder name can be at most "
                             f"{NAME_MAX_BYTES} bytes")


def check_output_file(path: Path, option: str) -> Path:
    """`path` can be written as a file: not a folder, under a writable folder (or one that can be made)."""
    path = Path(path)
    _check_path_text(path, option)
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
    _check_path_text(path, option)
    if path.exists() and not path.is_dir():
        raise InputError(f"{option}: {path} is a file; give a folder")
    base = _existing_ancestor(path)
    if not base.is_dir():
        raise InputError(f"{option}: cannot write into {path}: {base} is a file, not a folder")
    if not os.access(base, os.W_OK | os.X_OK):
        raise InputError(f"{option}: cannot write into {path}: {base} is not writable")
    return path


def file_stem(name: str) -> str:
    """The output's name as it appears inside its temporary names: itself, or (when long) a prefix and a
    hash, so a temporary name always fits in one path component."""
    if len(os.fsencode(name)) <= TEMP_STEM_BYTES:
        return name
    digest = hashlib.sha1(os.fsencode(name)).hexdigest()[:8]
    return name[:40].encode("utf-8", "ignore")[:40].decode("utf-8", "ignore") + "~" + digest


def temp_name(path: Path) -> str:
    return f".{file_stem(Path(path).name)}.{os.getpid()}."


def lock_file(fd: int) -> None:
    """Hold an advisory lock on a temporary file while writing it: a cleaner never removes a locked one."""
    try:
        import fcntl

        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except (ImportError, OSError):
        pass


def _locked_by_someone(entry: Path) -> bool:
    try:
        import fcntl
    except ImportError:                      # pragma: no cover - not POSIX: fall back on the pid alone
        return False
    try:
        fd = os.open(entry, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return True                          # cannot tell: leave it
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except OSError:
        return True
    finally:
        os.close(fd)


def _pid_alive(pid: int) -> bool:
    """The process exists and is not a zombie (a killed writer its parent has not reaped yet is dead)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        pass                 # exists, owned by someone else
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            state = fh.read().rsplit(b")", 1)[1].split()[0]
        return state not in (b"Z", b"X")
    except (OSError, IndexError):
        return True


def clean_stale_temps(folder: Path, name: str | None = None, ours: bool = False) -> list[Path]:
    """Remove temporary files and folders that killed runs left in `folder` (those of `name` only,
    when given): their writer's process is gone (or a zombie) and they are not locked, or (older
    versions, no pid) they are old. `ours`: the caller holds the lock for `name`, so every temporary
    of that name is a dead run's."""
    removed: list[Path] = []
    try:
        entries = list(Path(folder).iterdir())
    except OSError:
        return removed
    now = time.time()
    stem = file_stem(name) if name is not None else None
    for entry in entries:
        m = _TEMP.match(entry.name)
        if m:
            if stem is not None and m.group("name") != stem:
                continue
            if not (ours and stem is not None):
                if _pid_alive(int(m.group("pid"))) or (entry.is_file() and _locked_by_someone(entry)):
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
    fds: list[int] = []
    try:
        for path, data in files:
            path = Path(path)
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                clean_stale_temps(path.parent, path.name)
                fd, tmp = tempfile.mkstemp(prefix=temp_name(path), suffix=".tmp", dir=path.parent)
                temps.append((tmp, path))
                lock_file(fd)
                fds.append(fd)
                os.write(fd, b"") if not data else _write_all(fd, data)
                os.fsync(fd)
                os.chmod(tmp, 0o666 & ~current_umask())
            except OSError as exc:
                raise InputError(f"cannot write {path}: {os_reason(exc)}") from None
        for tmp, path in temps:
            try:
                os.replace(tmp, path)
            except OSError as exc:
                raise InputError(f"cannot write {path}: {os_reason(exc)}") from None
    finally:
        for tmp, _ in temps:
            Path(tmp).unlink(missing_ok=True)
        for fd in fds:
            os.close(fd)
    return [Path(p) for p, _ in files]


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
