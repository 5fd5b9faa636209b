"""The one place commands get a rich Console: whole tables in pipes, files and CI logs."""

from __future__ import annotations

import os

# rich falls back to 80 columns when stdout is not a terminal and then cuts cells ("a100-8…"). Piped or
# redirected output gets this width instead, so every table prints whole (tables keep their natural width).
PIPE_WIDTH = 400


def make_console(stderr: bool = False):
    from rich.console import Console

    console = Console(stderr=stderr)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = Console(stderr=stderr, width=PIPE_WIDTH)
    return console
