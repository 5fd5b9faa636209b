"""The one error type for bad input: it knows the file, the field path and the line."""

from __future__ import annotations


class InputError(Exception):
    """Bad user input. The CLI prints `str(err)` as one line and exits 2."""

    def __init__(self, message: str, *, file: str | None = None, field: str | None = None,
                 line: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.file = file
        self.field = field
        self.line = line

    def __str__(self) -> str:
        where = ""
        if self.file:
            where = self.file + (f":{self.line}" if self.line else "") + ": "
        field = f"{self.field}: " if self.field else ""
        return f"{where}{field}{self.message}"


def format_path(path: tuple) -> str:
    """('tree', 'children', 0, 'tokens') -> 'tree.children[0].tokens'."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out
