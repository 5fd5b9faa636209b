"""Ids people type: case-insensitive matching, short aliases, and "did you mean" on a typo."""

from __future__ import annotations

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
    import difflib

    by_lower = {i.lower(): i for i in ids}
    close = difflib.get_close_matches(ref.strip().lower(), list(by_lower), n=2, cutoff=0.6)
    if not close:
        return ""
    return f" (did you mean {' or '.join(by_lower[c] for c in close)}?)"
