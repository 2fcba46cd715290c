"""The `alight` command. Server-side commands import alight_server lazily."""

from __future__ import annotations

import typer

app = typer.Typer(help="alight: train the agents you already run.", no_args_is_help=True)


def main() -> None:
    app()
