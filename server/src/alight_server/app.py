"""The FastAPI application factory: wires store, auth, API, gateway and OTLP ingest."""

from __future__ import annotations

from fastapi import FastAPI

from alight_server.config import ServerConfig
from alight_server.store import Store, open_store


def create_app(config: ServerConfig | None = None, store: Store | None = None) -> FastAPI:
    """Build the server. `store` defaults to the one at `config.db_url`.

    Routers live in their own modules; this function only assembles them.
    """
    from alight_server.api import health, rollouts, trajectory, upstreams
    from alight_server.errors import install_error_handlers
    from alight_server.gateway import routes as gateway_routes
    from alight_server.otlp import router as otlp_router

    config = config or ServerConfig()
    store = store or open_store(config.db_url)
    app = FastAPI(title="alight", version="0.1.0")
    app.state.config = config
    app.state.store = store
    install_error_handlers(app, config)
    app.include_router(health.router)
    app.include_router(rollouts.router, prefix="/api")
    app.include_router(upstreams.router, prefix="/api")
    app.include_router(trajectory.router, prefix="/api")
    app.include_router(otlp_router)
    gateway_routes.install(app)
    return app
