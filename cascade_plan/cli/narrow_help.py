"""`--help` that never cuts an option name: below `RICH_HELP_MIN_COLUMNS` (the narrowest width at
which typer's rich option tables of every command fit whole, measured with
`COLUMNS=N cascade-plan CMD --help | grep -c …`), help is printed in click's plain layout, which puts
a long option on its own line and wraps the text beside it instead of truncating with '…'."""

from __future__ import annotations

import os
import shutil
from typing import TYPE_CHECKING

from typer.core import MarkupMode, TyperCommand

if TYPE_CHECKING:  # pragma: no cover
    from typer import _click as click  # typer >= 0.27 vendors click (older ones run on click itself)

    _HelpBase = click.Command        # the mixin goes on typer's command and group classes, both click commands
else:
    _HelpBase = object

RICH_HELP_MIN_COLUMNS = 120


def help_columns() -> int:
    """The width help is printed at: $COLUMNS, else the terminal's, else 80 (as rich and click decide)."""
    try:
        return int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        return shutil.get_terminal_size((80, 24)).columns


class NarrowSafeHelp(_HelpBase):
    """Mixin for typer's command and group classes."""

    rich_markup_mode: MarkupMode            # set by typer's command and group classes

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        if help_columns() >= RICH_HELP_MIN_COLUMNS:
            return super().format_help(ctx, formatter)
        mode, self.rich_markup_mode = self.rich_markup_mode, None
        try:
            return super().format_help(ctx, formatter)
        finally:
            self.rich_markup_mode = mode


class NarrowSafeCommand(NarrowSafeHelp, TyperCommand):
    pass
