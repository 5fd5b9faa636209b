"""The header of every JSON document cascade-plan prints: which version of the document's layout it is and
which cascade-plan wrote it, always first. (Calibration files carry their own format version: see the
calibration schema.) A leaf module, so that every layer can use it."""

from __future__ import annotations

from typing import Any, Mapping

SCHEMA_VERSION = 1        # of every printed document's layout; a key removed or changed in meaning bumps it


def envelope(body: Mapping[str, Any] | None = None, *, schema_version: int = SCHEMA_VERSION,
             tool_version: str | None = None) -> dict[str, Any]:
    """`{"schema_version": ..., "tool_version": ..., **body}`; tool_version defaults to this package's."""
    if tool_version is None:
        from cascade_plan.version import __version__ as tool_version
    return {"schema_version": schema_version, "tool_version": tool_version, **(body or {})}
