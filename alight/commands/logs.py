"""`alight logs` (TODO)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    @app.command("logs")
    def logs() -> None:
        """Not built yet."""
        raise typer.Exit(2)
