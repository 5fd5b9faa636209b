"""The `cascade-plan` entry point: imports nothing until it runs, so that Ctrl-C at any moment, start-up
included, is one line ("interrupted") and exit status 130, never a traceback. Whatever was being written
is removed by the writer's own cleanup (outputs.py) as the interrupt unwinds through it."""

from __future__ import annotations

import sys

EXIT_INTERRUPTED = 130          # 128 + SIGINT, what shells report for a command stopped by Ctrl-C
# One-shot commands that answer in well under a second from small arrays: OpenBLAS would start its thread pool
# for nothing when numpy loads (they multiply no matrices: 40-60 ms of `estimate` on a 2-core machine), and the
# cyclic garbage collector ran ~100 times over the modules and the decoded calibration files in every run
# (25-90 ms), with nothing to reclaim before the process exits; and the interpreter's exit, which collects
# whatever is alive even with the collector disabled, spent another ~70 ms doing it.
ONE_SHOT = frozenset({"estimate"})


def _one_shot(argv: list[str]) -> bool:
    """A one-shot command's process: one OpenBLAS thread unless the user chose a number (set before numpy is
    first imported: OpenBLAS reads it once, when it loads), and no automatic collection (gc.collect() still
    runs where asked, as on an interrupt). True for such a command."""
    import gc
    import os

    if len(argv) > 1 and argv[1] in ONE_SHOT:
        if "numpy" not in sys.modules:
            os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
        gc.disable()
        return True
    return False


def interrupted() -> None:
    """Say so in one line and exit 130; a second Ctrl-C while saying it changes nothing."""
    import os
    import signal

    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except (ValueError, OSError):       # not the main thread
        pass
    try:
        sys.stderr.write("interrupted\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        pass
    os._exit(EXIT_INTERRUPTED)           # no interpreter teardown: nothing left to print a traceback


def _finished(one_shot: bool = False) -> None:
    """The command is done (its output written and flushed): a Ctrl-C from here on changes nothing. Without
    this, one in the interpreter's teardown (tens of ms, after Python restores the default handler) would
    kill the process by the signal, without the one line. A one-shot command's objects are frozen out of the
    exit's collections (their memory goes back with the process; such a command holds no file or connection
    that a finaliser would have to close)."""
    import gc
    import signal

    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except (ValueError, OSError):
        pass
    if one_shot:
        gc.freeze()


def from_interrupt(exc: BaseException) -> bool:
    """Whether a Ctrl-C is behind `exc`: Python wraps one that lands while a class is being defined (in a
    descriptor's __set_name__, e.g. a cached_property's, during an import) in a RuntimeError."""
    from cascade_plan.cli.interrupts import Interrupted

    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        if isinstance(link, (KeyboardInterrupt, Interrupted)):
            return True
        seen.add(id(link))
        link = link.__cause__ or link.__context__
    return False


def main() -> None:
    from cascade_plan.cli.interrupts import Interrupted  # a leaf: nothing else is imported before the try

    one_shot = False
    try:
        one_shot = _one_shot(sys.argv)
        from cascade_plan.cli.app import main as run

        run()
    except SystemExit:                  # how click ends every command, answered or refused
        _finished(one_shot)
        raise
    except (KeyboardInterrupt, Interrupted):
        pass
    except Exception as exc:            # noqa: BLE001 (re-raised unless a Ctrl-C caused it)
        if not from_interrupt(exc):
            raise
    else:
        _finished(one_shot)
        return
    # Outside the except block the traceback is gone, so what the command held (a DuckDB connection and its
    # spill files, open temporaries) is released before the exit.
    import gc

    gc.collect()
    interrupted()
