"""`alight train` (TODO)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    @app.command("train")
    def train() -> None:
        """Not built yet."""
        raise typer.Exit(2)
