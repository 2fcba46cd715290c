"""TODO: gateway routes (/gw/{rollout_id}/{attempt}/v1/... and /v1/...)."""

from __future__ import annotations

from fastapi import FastAPI


def install(app: FastAPI) -> None:
    """Add the gateway's routes and state (app.state.gateway) to the app."""
