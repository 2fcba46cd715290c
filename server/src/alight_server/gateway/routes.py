"""Gateway routes: the OpenAI/Anthropic-compatible agent API, per attempt and at plain /v1."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import Response

from alight_server.config import ServerConfig
from alight_server.gateway import admin
from alight_server.gateway.container import Gateway
from alight_server.gateway.request.dispatch import FLAVOURS, MODELS, AgentEndpoint, GatewayDispatch


class _Served(Response):
    """Hands the request to the gateway's ASGI layer (for requests that reached the FastAPI routes)."""

    def __init__(self, endpoint: AgentEndpoint, route: str, rollout_id: str | None, attempt: int | None) -> None:
        super().__init__()
        self.endpoint, self.route, self.rollout_id, self.attempt = endpoint, route, rollout_id, attempt

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.endpoint.serve(scope, receive, send, self.route, self.rollout_id, self.attempt)


def _agent_router(endpoint: AgentEndpoint) -> APIRouter:
    """The agent routes as FastAPI sees them: documented in OpenAPI, served by `endpoint`.

    Requests for these paths normally never reach FastAPI (GatewayDispatch
    answers them first); the endpoints serve the rest the same way.
    """
    router = APIRouter(tags=["gateway"])

    def add(route: str, method: str) -> None:
        async def per_attempt(request: Request, rollout_id: str, attempt: int) -> Response:
            return _Served(endpoint, route, rollout_id, attempt)

        async def by_token(request: Request) -> Response:
            return _Served(endpoint, route, None, None)

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
    """Add the gateway's state (app.state.gateway), routes, middleware and change hooks to the app.

    Call it after every other middleware is added: GatewayDispatch is then the outermost one
    (add_middleware puts the latest outside), so model calls pay for none of the others.
    """
    config: ServerConfig = app.state.config
    gateway = Gateway(
        app.state.store,
        config.gateway,
        lambda: app.state.token_secret,
        max_body_bytes=config.max_body_bytes,
        key_sources=config.key_sources(),
    )
    app.state.gateway = gateway
    endpoint = AgentEndpoint(gateway)
    app.add_middleware(GatewayDispatch, endpoint=endpoint)
    app.include_router(_agent_router(endpoint))
    app.include_router(admin.router)
    # An attempt finished or its rollout moved: re-read its state on the next call (refused at once if ended).
    app.state.rollout_changed_hooks.append(gateway.attempts.forget)
    app.state.upstreams_changed_hooks.append(gateway.upstreams.invalidate)
    app.state.attempt_finish_amends.append(gateway.limits.verdict)  # past its budget: budget_exceeded, reward 0

    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(a: Any) -> AsyncIterator[Any]:
        async with inner(a) as state:
            await gateway.sync.start()
            yield state
        await gateway.aclose()

    app.router.lifespan_context = lifespan
