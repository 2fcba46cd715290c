"""TODO: error handlers: every failure is a 4xx with a message a person can act on."""

from __future__ import annotations

from fastapi import FastAPI

from alight_server.config import ServerConfig


def install_error_handlers(app: FastAPI, config: ServerConfig) -> None:
    pass
