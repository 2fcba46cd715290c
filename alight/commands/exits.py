# pyright: strict
"""How a command stops on an error: the message on stderr, then the exit code."""

from __future__ import annotations

import typer


def exit_with(message: str, code: int = 1) -> typer.Exit:
    """Print `message` to stderr and return the exit to raise: `raise exit_with(f"cannot read {path}", 2) from exc`."""
    typer.echo(message, err=True)
    return typer.Exit(code)
