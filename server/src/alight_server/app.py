"""The FastAPI application factory: wires store, auth, API, gateway and OTLP ingest."""

from __future__ import annotations

import inspect
import logging
from typing import Any

from fastapi import FastAPI

from alight_server.config import ServerConfig
from alight_server.http.auth import derive_token_secret, generate_admin_key
from alight_server.store import Store, open_store
from alight_server.store.keys.upstream import check_sealed

log = logging.getLogger("alight.server")

# FastAPI's native OpenTelemetry (0.16x) traces every request with the process's global provider. Where an
# agent runs in the server's process (`alight run`, in-process rollouts) that is the rollout's own provider,
# and a gateway call carries the agent's traceparent: server spans would join the agent's trajectory. The
# server is where spans land, not a source of them; it also spares the gateway's hot path the check.
_NO_NATIVE_TELEMETRY: dict[str, Any] = (
    {"telemetry": {"tracing": False, "metrics": False, "logs": False}}
    if "telemetry" in inspect.signature(FastAPI.__init__).parameters
    else {}
)


def create_app(config: ServerConfig | None = None, store: Store | None = None) -> FastAPI:
    """Build the server. `store` defaults to the one at `config.db_url`.

    With no admin key configured a random one is generated, so admin routes are never open (`alight serve`
    prints the key it generated).
    """
    from alight_server import ui
    from alight_server.api import attempts, health, reviews, rollouts, runs, trajectory, upstreams
    from alight_server.evaluation.evaluators import install_evaluator
    from alight_server.gateway import routes as gateway_routes
    from alight_server.http import hooks
    from alight_server.http.errors import install_error_handlers
    from alight_server.store import purge
    from alight_server.traces.otlp import router as otlp_router

    config = config or ServerConfig()
    if not config.admin_key:
        config = config.model_copy(update={"admin_key": generate_admin_key()})
        log.warning("no admin key configured: generated one for this process only")
    assert config.admin_key is not None
    data_key = config.kek_source()  # the KEK that wraps the store's data keys (store/keys/kek.py)
    store = store or open_store(config.db_url, data_key)
    store.use_data_key(data_key)  # a store handed in opened under its own: every replica opens the same keys
    store.seal_runner_env_under(config.admin_key)  # without ALIGHT_SECRET_KEY: a restart with this key opens them
    check_sealed(store.list_upstreams())  # stored keys this server cannot open: say so now, not at the first call
    app = FastAPI(
        title="alight",
        version="0.1.0",
        description="alight server: rollouts, gateway, OTLP ingest.",
        **_NO_NATIVE_TELEMETRY,
    )
    app.state.config = config
    app.state.viewer_keys = config.all_viewer_keys()  # the key files read once: a bad one fails the start
    app.state.reviewer_keys = config.all_reviewer_keys()
    app.state.store = store
    app.state.token_secret = (
        config.token_secret.encode() if config.token_secret else derive_token_secret(config.admin_key)
    )
    # api/attempts.py's hooks (evaluators) and amends (the gateway's budgets: gateway/limits/verdict.py); the amends
    # run first, on every report of the attempt, the hooks before its end is recorded.
    app.state.attempt_finished_hooks = []
    app.state.attempt_finish_amends = []
    hooks.install(app)  # rollout_changed / upstreams_changed: the gateway drops what it cached
    install_evaluator(app, config)
    install_error_handlers(app, config)
    app.include_router(health.router)
    for api in (rollouts, attempts, upstreams, trajectory, runs, reviews):
        app.include_router(api.router, prefix="/api")
    ui.install(app)
    app.include_router(otlp_router)
    gateway_routes.install(app)
    purge.install(app, config.retention)  # the periodic purge, when retention is configured
    return app
