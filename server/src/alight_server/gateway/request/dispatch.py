"""The agent routes as a lean ASGI middleware in front of the FastAPI app (the gateway's hot path).

What model calls skip this way, and what still reaches FastAPI: docs/gateway.md "How a call is served".
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from alight.semconv import HEADER_AGENT, HEADER_ROLE, HEADER_TRACEPARENT
from alight_server.gateway.callers import presented_token
from alight_server.gateway.container import Gateway
from alight_server.gateway.errors import GatewayError
from alight_server.gateway.flavours.base import Flavour
from alight_server.gateway.flavours.messages import MessagesFlavour
from alight_server.gateway.flavours.passthrough import ChatFlavour, CompletionsFlavour
from alight_server.gateway.flavours.responses import ResponsesFlavour
from alight_server.gateway.reply import Receive, Reply, Send, send_reply
from alight_server.gateway.request.arrival import ARRIVED
from alight_server.gateway.request.client_gone import DisconnectWatch
from alight_server.gateway.request.pipeline import CallPipeline

log = logging.getLogger("alight.gateway")

ASGIApp = Callable[[MutableMapping[str, Any], Receive, Send], Awaitable[None]]

FLAVOURS: dict[str, Flavour] = {
    "chat/completions": ChatFlavour(),
    "completions": CompletionsFlavour(),
    "responses": ResponsesFlavour(),
    "messages": MessagesFlavour(),
}
MODELS = "models"
_TRACEPARENT = HEADER_TRACEPARENT.encode()
_AGENT, _ROLE = HEADER_AGENT.encode(), HEADER_ROLE.encode()  # several policies: who is calling (routing.py)
_WANTED = frozenset({b"authorization", b"x-api-key", _TRACEPARENT, b"content-length", _AGENT, _ROLE})


def match(path: str) -> tuple[str, str | None, int | None] | None:
    """(route after /v1/, rollout id, attempt) for a gateway URL; None for any other path."""
    if path.startswith("/v1/"):
        rest, rollout, attempt = path[4:], None, None
    elif path.startswith("/gw/"):
        parts = path[4:].split("/", 3)
        if len(parts) != 4 or parts[2] != "v1" or not parts[0] or not (parts[1].isascii() and parts[1].isdigit()):
            return None
        rollout, attempt, rest = parts[0], int(parts[1]), parts[3]
    else:
        return None
    return (rest, rollout, attempt) if rest in FLAVOURS or rest == MODELS else None


def _body_reader(receive: Receive, declared: str | None, limit: int) -> Callable[[], Awaitable[bytes]]:
    async def read() -> bytes:
        too_big = {"connection": "close"}  # the unread rest of the body must not be parsed as a request
        hint = "(max_body_bytes in the server config)"
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            raise GatewayError(413, f"request body is {declared} bytes; the limit is {limit} {hint}", headers=too_big)
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                raise GatewayError(400, "the client closed the connection before sending the whole body")
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise GatewayError(413, f"request body is over the limit of {limit} bytes {hint}", headers=too_big)
            chunks.append(chunk)
            if not message.get("more_body", False):
                return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    return read


class AgentEndpoint:
    """Serves one gateway request as raw ASGI: the headers it needs, its body, the pipeline, the reply."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway
        self.pipeline = CallPipeline(gateway)

    async def serve(
        self,
        scope: MutableMapping[str, Any],
        receive: Receive,
        send: Send,
        route: str,
        rollout: str | None,
        attempt: int | None,
    ) -> None:
        """Answer one gateway request; `route` is what follows /v1/ (a flavour's path or `models`)."""
        began = time.perf_counter()
        headers = {name: value.decode("latin-1") for name, value in scope["headers"] if name in _WANTED}
        token = presented_token(headers.get(b"authorization"), headers.get(b"x-api-key"))
        flavour = FLAVOURS.get(route)
        watch = DisconnectWatch(receive)
        try:
            if flavour is None:
                reply = await self._models(token, rollout, attempt)
            else:
                read = watch.after(_body_reader(receive, headers.get(b"content-length"), self.gateway.max_body_bytes))
                who = (headers.get(_AGENT), headers.get(_ROLE))
                reply = await self.pipeline.handle(
                    flavour, read, token, headers.get(_TRACEPARENT), rollout, attempt, who=who
                )
        except asyncio.CancelledError:
            if not watch.gone:
                raise
            await watch.settle()  # the agent left; the pipeline recorded the call as client_gone
            return
        except Exception:
            log.exception("gateway error on %s %s", scope["method"], scope["path"])
            anthropic = flavour is not None and flavour.anthropic_errors
            reply = GatewayError(500, "internal gateway error; the server log has the details").reply(anthropic)
        finally:
            watch.stop()
        if watch.gone:  # it left just as the answer came: nobody to send it to
            if reply.release is not None:
                reply.release()
            await watch.settle()
            return
        self.gateway.metrics.response_started(scope.get(ARRIVED), began, time.perf_counter())
        await send_reply(reply, receive, send)

    async def _models(self, token: str | None, rollout: str | None, attempt: int | None) -> Reply:
        try:
            await self.gateway.attempts.resolve(token, rollout, attempt)
            return Reply(200, await self.gateway.models_listing())
        except GatewayError as exc:
            return exc.reply()


class GatewayDispatch:
    """ASGI middleware (`app.add_middleware`): serves gateway URLs itself, hands every other request to `app`."""

    def __init__(self, app: ASGIApp, endpoint: AgentEndpoint) -> None:
        self.app = app
        self.endpoint = endpoint

    async def __call__(self, scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            path = scope["path"]
            root = scope.get("root_path")
            if root and path.startswith(root + "/"):
                path = path[len(root) :]
            route = match(path)
            if route is not None and scope["method"] == ("GET" if route[0] == MODELS else "POST"):
                await self.endpoint.serve(scope, receive, send, *route)
                return
        await self.app(scope, receive, send)
