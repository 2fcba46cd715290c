"""`alight run` (TODO)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    @app.command("run")
    def run() -> None:
        """Not built yet."""
        raise typer.Exit(2)
