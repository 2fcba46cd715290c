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
from alight_server.gateway.attempts import presented_token
from alight_server.gateway.errors import GatewayError
from alight_server.gateway.flavour import Flavour
from alight_server.gateway.messages import MessagesFlavour
from alight_server.gateway.passthrough import ChatFlavour, CompletionsFlavour
from alight_server.gateway.pipeline import Gateway
from alight_server.gateway.responses import ResponsesFlavour

FLAVOURS: dict[str, Flavour] = {
    "chat/completions": ChatFlavour(),
    "completions": CompletionsFlavour(),
    "responses": ResponsesFlavour(),
    "messages": MessagesFlavour(),
}


def token_secret(app: FastAPI) -> bytes:
    """The attempt-token secret the rest of the server uses (set by create_app, else derived)."""
    secret = getattr(app.state, "token_secret", None)
    if secret:
        return secret if isinstance(secret, bytes) else str(secret).encode()
    config: ServerConfig = app.state.config
    if config.token_secret:
        return config.token_secret.encode()
    return derive_token_secret(config.admin_key or "")


def _gateway(request: Request) -> Gateway:
    return request.app.state.gateway


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


def _agent_router() -> APIRouter:
    router = APIRouter(tags=["gateway"])

    def add(path: str, flavour: Flavour) -> None:
        async def per_attempt(request: Request, rollout_id: str, attempt: int) -> Response:
            return await _gateway(request).handle(request, flavour, rollout_id, attempt)

        async def by_token(request: Request) -> Response:
            return await _gateway(request).handle(request, flavour)

        name = path.replace("/", "_")
        router.add_api_route(
            f"/gw/{{rollout_id}}/{{attempt}}/v1/{path}", per_attempt, methods=["POST"], name=f"gw_{name}"
        )
        router.add_api_route(f"/v1/{path}", by_token, methods=["POST"], name=f"v1_{name}")

    for path, flavour in FLAVOURS.items():
        add(path, flavour)

    async def models(request: Request, rollout_id: str | None = None, attempt: int | None = None) -> Response:
        gw = _gateway(request)
        token = presented_token(request.headers.get("authorization"), request.headers.get("x-api-key"))
        try:
            await gw.attempts.resolve(token, rollout_id, attempt)
            return Response(content=await gw.models_listing(), media_type="application/json")
        except GatewayError as exc:
            return exc.response()

    router.add_api_route("/gw/{rollout_id}/{attempt}/v1/models", models, methods=["GET"], name="gw_models")
    router.add_api_route("/v1/models", models, methods=["GET"], name="v1_models")
    return router


def install(app: FastAPI) -> None:
    """Add the gateway's routes and state (app.state.gateway) to the app."""
    config: ServerConfig = app.state.config
    gateway = Gateway(app.state.store, config.gateway, lambda: token_secret(app), max_body_bytes=config.max_body_bytes)
    app.state.gateway = gateway
    app.include_router(_agent_router())
    app.include_router(admin.router)

    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(a: Any) -> AsyncIterator[Any]:
        async with inner(a) as state:
            yield state
        await gateway.aclose()

    app.router.lifespan_context = lifespan
