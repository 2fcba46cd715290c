"""The console every command prints through (alight/commands/console.py): a pipe keeps a wide table whole."""

from __future__ import annotations

import os
import pty

import pytest
from rich.table import Table

from alight.commands.console import LOG_WIDTH, output_console

CELLS = ("a metric whose name alone takes up most of a line", "-0.417 ± 0.285", "0.583 ± 0.285 (after)")


def _wide_table() -> Table:
    table = Table(title="before / after")
    for header in ("metric", "before", "after"):
        table.add_column(header)
    table.add_row(*CELLS)
    return table


def test_a_table_printed_into_a_pipe_keeps_every_column_on_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    read, write = os.pipe()
    with os.fdopen(write, "w", encoding="utf-8") as pipe:
        output_console(pipe).print(_wide_table())
    with os.fdopen(read, encoding="utf-8") as printed:
        lines = printed.read().splitlines()
    (row,) = [line for line in lines if CELLS[0] in line]
    assert all(cell in row for cell in CELLS), lines
    assert len(row) > 80


def test_a_terminal_keeps_the_width_rich_gives_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    leader, follower = pty.openpty()
    try:
        with os.fdopen(follower, "w", encoding="utf-8", closefd=False) as terminal:
            assert terminal.isatty()
            assert output_console(terminal).width == 80 != LOG_WIDTH
    finally:
        os.close(follower)
        os.close(leader)
