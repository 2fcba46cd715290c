"""The embedded server `alight run` starts without --server (reached through the `alight.server` entry point)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import typer

from alight_server.app import create_app
from alight_server.config import ServerConfig
from alight_server.http.auth import generate_admin_key
from alight_server.stacks.server_thread import ServerThread, free_port


@contextlib.contextmanager
def embedded_server(workdir: Path, evaluator: str | None = None) -> Iterator[tuple[str, str]]:
    """(url, admin key) of a server on a temporary SQLite file, for the duration of the block."""
    key = generate_admin_key()
    config = ServerConfig(
        admin_key=key, db_url=f"sqlite:///{workdir / 'alight.db'}", port=free_port(), evaluator=evaluator
    )
    try:
        app = create_app(config)
    except ValueError as exc:  # an evaluator that cannot be loaded
        raise typer.BadParameter(str(exc), param_hint="--evaluator") from exc
    with ServerThread(app, port=config.port) as url:
        yield url, key
