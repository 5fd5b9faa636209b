"""Ctrl-C inside a command, carried past click to entry.main, which prints one line and exits 130."""

from __future__ import annotations

import functools
from typing import Any, Callable


class Interrupted(Exception):
    """Ctrl-C inside a command, carried past click (which would print a blank line and 'Aborted!')."""


def interruptible(fn: Callable) -> Callable:
    """Ctrl-C inside `fn` becomes Interrupted, which click lets through (a KeyboardInterrupt it turns into a
    blank line and 'Aborted!'); entry.main prints one line and exits 130."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except KeyboardInterrupt:
            pass
        except Exception as exc:   # noqa: BLE001 (re-raised unless it is DuckDB's interrupt)
            # DuckDB turns a Ctrl-C during any of its queries into its own error ("Query interrupted"),
            # whichever command's query it was (analyze's scan, its bad-line pass, route --log)
            from cascade_plan.logs.duck_reader import interrupt_query

            if not interrupt_query(exc):
                raise
        raise Interrupted()
    return wrapper
