"""alight server: store, gateway, OTLP ingest, trajectories, controller, inference, trainers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from alight_server.app import create_app
    from alight_server.config import ServerConfig

__all__ = ["ServerConfig", "create_app"]


def __getattr__(name: str) -> Any:
    """The app and its config on first use: a process that imports one part (the inference server, the
    controller, a command) does not pay for importing the whole app, its routes, store and redaction."""
    if name == "create_app":
        from alight_server.app import create_app

        return create_app
    if name == "ServerConfig":
        from alight_server.config import ServerConfig

        return ServerConfig
    raise AttributeError(f"module 'alight_server' has no attribute {name!r}")
