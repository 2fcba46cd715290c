"""alight server: store, gateway, OTLP ingest, trajectories, controller, inference, trainers."""

from alight_server.app import create_app
from alight_server.config import ServerConfig

__all__ = ["ServerConfig", "create_app"]
