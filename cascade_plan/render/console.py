"""The one place commands get a rich Console: whole tables in pipes, files and CI logs."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from rich.console import Console
    from rich.text import Text

# rich falls back to 80 columns when stdout is not a terminal and then cuts cells ("a100-8…"). Piped or
# redirected output gets this width instead, so every table prints whole (tables keep their natural width).
PIPE_WIDTH = 400


def make_console(stderr: bool = False) -> Console:
    from rich.console import Console

    console = Console(stderr=stderr)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = Console(stderr=stderr, width=PIPE_WIDTH)
    return console


def written(text: str) -> Text:
    """The user's text (a name, a file, a log record) as written: rich reads a plain string as markup ("[red]")
    and emoji codes (":rocket:"), a Text as neither."""
    from rich.text import Text

    return Text(text)


def natural_width(header: list[str], rows: list[list[str]], gap: int = 1) -> int:
    """Columns a table of plain cells needs with no cell cut: the widest line of each column, plus `gap`
    between columns (the tables built for 80 columns use no padding and a one-character separator)."""
    widths = [max(len(line) for cell in column for line in str(cell).split("\n")) for column in zip(header, *rows)]
    return sum(widths) + gap * (len(widths) - 1)

