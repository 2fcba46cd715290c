"""The rich console a command prints through: a terminal's own width, or, into a pipe or a log file, every column
in UTF-8."""

from __future__ import annotations

import codecs
import io
import sys
from typing import IO

from rich.console import Console

# Wide enough for any table this project prints. A table is as wide as its content, not padded out to this.
LOG_WIDTH = 10_000


def output_console(file: IO[str] | None = None, *, stderr: bool = False) -> Console:
    """A Console on `file` (stdout, or stderr, when None) that fits a terminal's window; anywhere else rich would
    assume 80 columns (or $COLUMNS) and wrap a wider table's cells and cut its last columns, so there it keeps every
    column and a row its line. Colour follows rich's own rules (FORCE_COLOR, NO_COLOR) either way."""
    if _is_terminal(file if file is not None else sys.stderr if stderr else sys.stdout):
        return Console(file=file, stderr=stderr)
    return Console(file=file, stderr=stderr, width=LOG_WIDTH)


def utf8_into_pipes() -> None:
    """stdout and stderr write UTF-8 when they are a pipe or a file, whatever the locale says.

    In the locale's encoding a `±` goes out under latin-1 as the lone byte 0xB1 (broken in every UTF-8 reader), and
    under ASCII (PYTHONUTF8=0, C locale) the before/after table or `--help` stops with a UnicodeEncodeError. A
    terminal keeps the locale's encoding (rich draws ASCII boxes there). PEP 686 makes UTF-8 the default from 3.15.
    """
    for stream in (sys.stdout, sys.stderr):
        if (
            isinstance(stream, io.TextIOWrapper)
            and not _is_terminal(stream)
            and codecs.lookup(stream.encoding).name != "utf-8"
        ):
            stream.reconfigure(encoding="utf-8")


def _is_terminal(stream: IO[str]) -> bool:
    """Whether `stream` is a terminal (rich's own test also says yes to FORCE_COLOR in a log file)."""
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty; a closed file
        return False
