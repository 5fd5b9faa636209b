"""Ids people type: case-insensitive matching, short aliases, and "did you mean" on a typo."""

from __future__ import annotations

import re
from typing import Iterable


def match_id(ref: str, ids: Iterable[str], aliases: dict[str, str] | None = None) -> str | None:
    """The canonical id `ref` names (any case, or an alias), or None."""
    by_lower = {i.lower(): i for i in ids}
    key = ref.strip().lower()
    if key in by_lower:
        return by_lower[key]
    target = (aliases or {}).get(key)
    return by_lower.get(target.lower()) if target else None


def suggestion(ref: str, ids: Iterable[str]) -> str:
    """' (did you mean llama-3-8b?)' for a near miss, else ''."""
    import difflib  # here: only a miss needs it

    by_lower = {i.lower(): i for i in ids}
    close = difflib.get_close_matches(ref.strip().lower(), list(by_lower), n=2, cutoff=0.6)
    if not close:
        return ""
    return f" (did you mean {' or '.join(by_lower[c] for c in close)}?)"


SLUG_MAX = 64                                             # characters (ASCII: bytes) of one folder name
_RESERVED_ENDINGS = (".md", ".png", ".svg", ".json", ".tmp", ".tmpdir", ".old", ".lock")


def slug(name: str) -> str:
    """The folder name a workload's files go into, inside `--out`: lowercase ASCII letters, digits, `-`, `_`
    and single inner dots; never `.` or `..`, never hidden, never a name the report itself writes
    (`report.md`, `.cascade-plan-report`), at most SLUG_MAX characters (a long name keeps a hash of the
    whole so two long names stay distinct). Every name has one, so it is known before any work."""
    import hashlib  # here: OpenSSL's load is ~4 ms, and only long names need it

    out = "".join(ch if (ch.isascii() and ch.isalnum()) or ch in "-_." else "-" for ch in str(name).lower())
    out = re.sub(r"\.{2,}", ".", out).strip("-.")
    if out.endswith(_RESERVED_ENDINGS):
        out = out[: out.rindex(".")] + "-" + out[out.rindex(".") + 1:]
    if len(out) > SLUG_MAX:
        digest = hashlib.sha1(str(name).encode("utf-8", "surrogatepass")).hexdigest()[:8]
        out = out[: SLUG_MAX - 9].rstrip("-.") + "-" + digest
    return out or "workload"
