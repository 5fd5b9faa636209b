"""The README's command table lists every command the CLI registers, once, and nothing it does not."""

from __future__ import annotations

import re
from pathlib import Path

from cascade_plan.cli.app import COMMANDS

README = Path(__file__).resolve().parents[1] / "README.md"


def _table_commands() -> list[str]:
    text = README.read_text(encoding="utf-8")
    start = text.index("| command | what it answers |")
    rows = []
    for line in text[start:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        first = line.split("|")[1]
        rows += re.findall(r"`([a-z][a-z-]*)[ `]", first)  # every command a row names (`models`, `hardware`, ...)
    return rows


def test_every_command_is_in_the_readme_table_once():
    listed = _table_commands()
    names = [name for name, _ in COMMANDS]
    assert sorted(set(listed)) == sorted(names), (set(names) - set(listed), set(listed) - set(names))
    assert len(listed) == len(set(listed))
