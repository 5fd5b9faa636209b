"""A report's folder: replaced whole, and only when this tool wrote it.

A report folder holds a marker file (`.cascade-plan-report`: JSON with a format version and the list
of files the report wrote) and nothing else. A folder with any other file is refused with one line;
nothing of the user's is ever deleted or moved. Reports from before the list was kept (a marker of one
line) are recognised by it and may hold only what such a report wrote: report.md and one folder of .png
and .svg images per workload. One report at a time writes into
a folder: a lock beside it (`.NAME.cascade-plan.lock`, removed at the end) makes a second concurrent
run refuse with one line, where before every run printed `wrote` and all but one were discarded."""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path

from cascade_plan.errors import InputError
from cascade_plan.outputs import check_output_dir, clean_stale_temps, current_umask, file_stem, os_reason, temp_name

REPORT_MARKER = ".cascade-plan-report"
REPORT_FORMAT = 1
REPORT_KIND = "cascade-plan-report"
LEGACY_MARKER = "written by cascade-plan report"


def _marker_files(folder: Path) -> dict[str, str] | None:
    """The files a report wrote into `folder` and their SHA-256, as its marker lists them; None when `folder`
    has no marker of this tool's (or one it cannot read). A marker from before the list was kept: every
    .md/.png/.svg ({"*legacy*": ""})."""
    marker = folder / REPORT_MARKER
    try:
        if not marker.is_file() or marker.is_symlink() or marker.stat().st_size > 1 << 20:
            return None
        text = marker.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    if text.startswith(LEGACY_MARKER):
        return {"*legacy*": ""}
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    if not (isinstance(doc, dict) and doc.get("kind") == REPORT_KIND and isinstance(doc.get("format"), int)
            and isinstance(doc.get("files"), dict) and all(isinstance(h, str) for h in doc["files"].values())):
        return None
    return doc["files"]


def _sha256(path: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _foreign_file(folder: Path) -> str | None:
    """The first file under `folder` a report of this tool did not write (relative path), or None when
    the folder is empty or a report's own. A folder without the marker is never ours."""
    listed = _marker_files(folder)
    try:
        for root, dirs, files in os.walk(folder):
            dirs.sort()
            for f in sorted(files) + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
                rel_path = Path(root, f).relative_to(folder).as_posix()
                if rel_path == REPORT_MARKER:
                    continue
                if listed is None:
                    return rel_path
                full = os.path.join(root, f)
                if os.path.islink(full) or not os.path.isfile(full):
                    return f"{rel_path} (not a regular file)"
                if "*legacy*" in listed:
                    # what an earlier version wrote: report.md, and one folder of images per workload
                    depth = rel_path.count("/")
                    if not (rel_path == "report.md" or (depth == 1 and re.fullmatch(r".*\.(png|svg)", f))):
                        return rel_path
                elif rel_path not in listed:
                    return rel_path
                elif _sha256(Path(full)) != listed[rel_path]:
                    return f"{rel_path}, changed since the report wrote it"
    except OSError:
        return "?"
    if listed is None:
        try:
            if any(True for _ in folder.iterdir()):   # only empty folders, and no marker: not ours either
                return next(iter(sorted(p.name for p in folder.iterdir())))
        except OSError:
            return "?"
    return None


def marker_text(files: dict[str, str]) -> str:
    return json.dumps({"kind": REPORT_KIND, "format": REPORT_FORMAT,
                       "note": "written by cascade-plan report; the folder is replaced whole by the next report",
                       "files": dict(sorted(files.items()))}, indent=1) + "\n"


class FolderLock:
    """An advisory lock beside `out` (`.NAME.cascade-plan.lock`), taken without waiting: a second run
    that wants the same folder is told so. Removed when released; a killed holder's lock file is
    free (the kernel drops the lock with the process) and is taken over by the next run."""

    def __init__(self, out: Path, option: str, shown: Path | None = None) -> None:
        import fcntl

        self.path = out.parent / f".{file_stem(out.name)}.cascade-plan.lock"
        self.fd: int | None = None
        shown = shown or out
        for _ in range(20):
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
            except OSError as exc:
                raise InputError(f"{option}: cannot write into {shown}: {os_reason(exc)}") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                raise InputError(f"{option}: another cascade-plan report is writing into {shown} right now; wait "
                                 "for it to finish, or give another folder") from None
            try:
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:                         # not a lock file its holder removed while we opened it
                self.fd = fd
                return
            os.close(fd)
        raise InputError(f"{option}: other runs keep taking {shown}; try again")

    def release(self) -> None:
        if self.fd is not None:
            try:
                self.path.unlink()
            except OSError:
                pass
            os.close(self.fd)
            self.fd = None


class ReportFolder:
    """Build a report in a temporary folder beside `out`, then swap it in whole:

        with ReportFolder(out) as tmp:
            ... write into tmp ...
        # out now holds exactly what was written; the previous report is gone

    Only a folder this tool wrote (its marker lists every file in it), an empty one or a missing one is
    replaced; anything else is refused before any work, and nothing in it is touched. An exception inside
    the block removes the temporary folder and leaves `out` as it was. The folder's lock is held from
    construction to the end of the block (or process exit)."""

    def __init__(self, out: Path, option: str = "--out") -> None:
        self.out = Path(out)
        self.option = option
        check_output_dir(self.out, option)
        self.abs = Path(os.path.abspath(self.out))
        if self.abs.parent == self.abs:
            raise InputError(f"{option}: {self.out} is the root folder; give a folder for the report")
        cwd = Path(os.path.abspath(os.getcwd()))
        if cwd == self.abs or self.abs in cwd.parents:
            raise InputError(f"{option}: {self.out} is the current folder (or holds it); a report replaces its folder "
                             "whole: give a new folder, such as --out report")
        self._check_ours()
        try:
            self.abs.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError(f"{option}: cannot write into {self.out}: {os_reason(exc)}") from None
        self.lock = FolderLock(self.abs, option, self.out)
        self._check_ours()                   # again, now that no other report can change it
        self.tmp: Path | None = None

    def release(self) -> None:
        """Give the folder's lock back (also at the end of the block; safe to call twice)."""
        self.lock.release()

    def _check_ours(self) -> None:
        if self.abs.is_symlink():
            raise InputError(f"{self.option}: {self.out} is a symbolic link; give the folder it points to, or a "
                             "new one")
        if self.abs.exists():
            foreign = _foreign_file(self.abs)
            if foreign is not None:
                raise InputError(f"{self.option}: {self.out} is not a cascade-plan report folder: it holds "
                                 f"{foreign}, which this tool did not write; a report replaces its folder whole, so "
                                 "give a new or empty "
                                 "folder (nothing was changed)")

    def __enter__(self) -> Path:
        parent = self.abs.parent
        try:
            clean_stale_temps(parent, self.abs.name, ours=True)     # we hold the lock: any of this name is a dead run's
            self.tmp = Path(tempfile.mkdtemp(prefix=temp_name(self.abs), suffix=".tmpdir", dir=parent))
            os.chmod(self.tmp, 0o777 & ~current_umask())      # mkdtemp makes 0700; a report folder is an ordinary one
        except OSError as exc:
            self.lock.release()
            raise InputError(f"cannot write into {self.out}: {os_reason(exc)}") from None
        return self.tmp

    def __exit__(self, exc_type, exc, tb) -> None:
        assert self.tmp is not None
        try:
            if exc_type is not None:
                shutil.rmtree(self.tmp, ignore_errors=True)
                return
            self._swap()
        finally:
            self.lock.release()

    def _swap(self) -> None:
        assert self.tmp is not None
        out = self.abs
        try:
            written = [Path(r, f).relative_to(self.tmp).as_posix() for r, _, fs in os.walk(self.tmp) for f in fs]
            (self.tmp / REPORT_MARKER).write_text(marker_text({w: _sha256(self.tmp / w) for w in written
                                                              if w != REPORT_MARKER}))
        except OSError as exc:
            shutil.rmtree(self.tmp, ignore_errors=True)
            raise InputError(f"cannot write into {self.out}: {os_reason(exc)}") from None
        old: Path | None = None
        try:
            if out.exists():
                self._check_ours()
                old = Path(tempfile.mkdtemp(prefix=temp_name(out), suffix=".old", dir=out.parent))
                os.rmdir(old)
                os.rename(out, old)
            os.rename(self.tmp, out)
        except InputError:
            shutil.rmtree(self.tmp, ignore_errors=True)
            raise
        except OSError as exc:
            if old is not None and not out.exists():
                os.rename(old, out)          # put the previous report back
                old = None
            shutil.rmtree(self.tmp, ignore_errors=True)
            raise InputError(f"cannot write into {self.out}: {os_reason(exc)}") from None
        finally:
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
