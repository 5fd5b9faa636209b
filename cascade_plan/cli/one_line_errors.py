"""Command-line usage errors (a bad option value, a missing argument, an unknown command) as one line
on stderr and exit 2, like every other bad input, instead of click's multi-line usage box."""

from __future__ import annotations

import sys
from typing import Any, Sequence

import typer
from typer import Abort  # click's Abort on older typer, typer's own from 0.27
from typer.core import TyperGroup

from cascade_plan.cli.interrupts import Interrupted
from cascade_plan.cli.narrow_help import NarrowSafeHelp

try:
    from typer import _click as click  # typer >= 0.27 vendors click
except ImportError:                             # pragma: no cover - older typer on real click
    # no-redef whether or not click is installed beside typer (mypy then sees click's own types)
    import click  # type: ignore[no-redef, unused-ignore]


class OneLineErrorGroup(NarrowSafeHelp, TyperGroup):
    # Typer turns a Ctrl-C while it parses or dispatches into a silent exit status 130 (its Exit(130), returned
    # as the status outside standalone mode): carried past it as Interrupted, entry.main says "interrupted".
    def make_context(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().make_context(*args, **kwargs)
        except KeyboardInterrupt:
            raise Interrupted() from None

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            raise Interrupted() from None

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, windows_expand_args: bool = True, **extra: Any) -> Any:
        try:
            rv = super().main(args=args, prog_name=prog_name, complete_var=complete_var, standalone_mode=False,
                              windows_expand_args=windows_expand_args, **extra)
        except click.ClickException as exc:
            if not standalone_mode:
                raise
            if type(exc).__name__ == "NoArgsIsHelpError":     # `cascade-plan` alone: the help, as asked
                exc.show()
                sys.exit(exc.exit_code)
            ctx = getattr(exc, "ctx", None)                   # usage errors carry the command's context
            command = ctx.command_path if ctx is not None else "cascade-plan"
            message = " ".join(exc.format_message().split())
            typer.echo(f"error: {message} (see `{command} --help`)", err=True)
            sys.exit(exc.exit_code)
        except Abort as exc:
            if not standalone_mode:
                raise
            if isinstance(exc.__cause__ or exc.__context__, KeyboardInterrupt):
                raise KeyboardInterrupt from None     # Ctrl-C while click parsed: entry.main says "interrupted"
            typer.echo("error: aborted", err=True)
            sys.exit(1)
        if not standalone_mode:
            return rv
        sys.exit(rv if isinstance(rv, int) else 0)
