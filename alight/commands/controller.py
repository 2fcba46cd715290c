"""`alight controller` (TODO)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    @app.command("controller")
    def controller() -> None:
        """Not built yet."""
        raise typer.Exit(2)
