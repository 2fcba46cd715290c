"""Gateway routes: the OpenAI/Anthropic-compatible agent API, per attempt and at plain /v1."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import Response

from alight_server.auth import derive_token_secret
from alight_server.config import ServerConfig
from alight_server.gateway import admin
from alight_server.gateway.asgi import FLAVOURS, MODELS, GatewayDispatch
from alight_server.gateway.pipeline import Gateway


def token_secret(app: FastAPI) -> bytes:
    """The attempt-token secret the rest of the server uses (set by create_app, else derived)."""
    secret = getattr(app.state, "token_secret", None)
    if secret:
        return secret if isinstance(secret, bytes) else str(secret).encode()
    config: ServerConfig = app.state.config
    if config.token_secret:
        return config.token_secret.encode()
    return derive_token_secret(config.admin_key or "")


def rollout_changed(app: FastAPI, rollout_id: str) -> None:
    """An attempt finished or the rollout moved: the gateway re-reads its state on the next call."""
    gateway: Gateway | None = getattr(app.state, "gateway", None)
    if gateway is not None:
        gateway.attempts.forget(rollout_id)


def upstreams_changed(app: FastAPI) -> None:
    """An upstream was registered or removed: the gateway re-reads the list on the next call."""
    gateway: Gateway | None = getattr(app.state, "gateway", None)
    if gateway is not None:
        gateway.upstreams.invalidate()


class _Served(Response):
    """Hands the request to the gateway's ASGI layer (for requests that reached the FastAPI routes)."""

    def __init__(self, dispatch: GatewayDispatch, route: str, rollout_id: str | None, attempt: int | None) -> None:
        super().__init__()
        self.dispatch, self.route, self.rollout_id, self.attempt = dispatch, route, rollout_id, attempt

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.dispatch.serve(scope, receive, send, self.route, self.rollout_id, self.attempt)


def _agent_router(dispatch: GatewayDispatch) -> APIRouter:
    """The agent routes as FastAPI sees them: documented in OpenAPI, served by `dispatch`.

    Requests for these paths normally never reach FastAPI (GatewayDispatch
    answers them first); the endpoints serve the rest the same way.
    """
    router = APIRouter(tags=["gateway"])

    def add(route: str, method: str) -> None:
        async def per_attempt(request: Request, rollout_id: str, attempt: int) -> Response:
            return _Served(dispatch, route, rollout_id, attempt)

        async def by_token(request: Request) -> Response:
            return _Served(dispatch, route, None, None)

        name = route.replace("/", "_")
        router.add_api_route(
            f"/gw/{{rollout_id}}/{{attempt}}/v1/{route}", per_attempt, methods=[method], name=f"gw_{name}"
        )
        router.add_api_route(f"/v1/{route}", by_token, methods=[method], name=f"v1_{name}")

    for route in FLAVOURS:
        add(route, "POST")
    add(MODELS, "GET")
    return router


def install(app: FastAPI) -> None:
    """Add the gateway's routes and state (app.state.gateway) to the app.

    The agent routes are served by GatewayDispatch, wrapped around the whole
    middleware stack FastAPI builds, so model calls pay for none of it.
    """
    config: ServerConfig = app.state.config
    gateway = Gateway(app.state.store, config.gateway, lambda: token_secret(app), max_body_bytes=config.max_body_bytes)
    app.state.gateway = gateway
    build_stack = app.build_middleware_stack
    dispatch = GatewayDispatch(app.router, gateway)  # `app` is replaced by the built stack below

    def build_middleware_stack() -> Any:
        dispatch.app = build_stack()
        return dispatch

    # Starlette builds the stack on the first request; an instance attribute puts ours outermost.
    app.build_middleware_stack = build_middleware_stack  # type: ignore[method-assign]
    app.include_router(_agent_router(dispatch))
    app.include_router(admin.router)

    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(a: Any) -> AsyncIterator[Any]:
        async with inner(a) as state:
            await gateway.replicas.start()
            yield state
        await gateway.aclose()

    app.router.lifespan_context = lifespan
