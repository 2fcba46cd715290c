"""`alight serve` (TODO)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    @app.command("serve")
    def serve() -> None:
        """Not built yet."""
        raise typer.Exit(2)
