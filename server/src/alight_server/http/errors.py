"""Error answers: every failure is JSON `{"error": {"message", "type", "param", "code"}}` a person can act on.

Client mistakes (bad JSON, wrong types, unknown fields, unknown ids, illegal moves, oversize bodies) are 4xx naming
the problem; only a bug in the server is a 500, and that one says so without leaking internals.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from alight_server.config import ServerConfig
from alight_server.http.error_types import error_body
from alight_server.http.json_depth import TooDeep, check_raw_depth
from alight_server.store.base import Conflict, InvalidValue, NotFound, Purged, StoreError

log = logging.getLogger("alight.server")


def error_response(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(error_body(status, message), status_code=status, headers=headers)


def describe_validation(errors: Any) -> str:
    """`body.rollouts.0.timeout_s: Input should be greater than 0 (got -1)`; several joined by '; '."""
    parts = []
    for err in list(errors)[:10]:
        where = ".".join(str(p) for p in err.get("loc", ())) or "body"
        msg = err.get("msg", "invalid")
        if err.get("type") == "json_invalid":
            parts.append(f"malformed JSON: {err.get('ctx', {}).get('error', msg)}")
            continue
        got = err.get("input")
        if isinstance(got, bytes) and tuple(err.get("loc", ())) == ("body",):
            parts.append("the request body must be a JSON object sent with Content-Type: application/json")
            continue
        shown = "" if err.get("type") == "missing" or isinstance(got, dict | list) else f" (got {got!r:.80})"
        parts.append(f"{where}: {msg}{shown}")
    return "; ".join(parts) or "invalid request"


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
    if exc.status_code == 404 and detail == "Not Found":
        detail = f"no route {request.method} {request.url.path}; see /docs for the API"
    elif exc.status_code == 405:
        detail = f"{request.method} is not allowed on {request.url.path}"
    return error_response(exc.status_code, detail, headers=getattr(exc, "headers", None))


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError | ValidationError)
    errors = exc.errors()
    status = 400 if any(e.get("type") == "json_invalid" for e in errors) else 422
    return error_response(status, describe_validation(errors))


# Purged is a NotFound (410: the rollout existed and was deleted); AttemptEnded is a Conflict
_STORE_STATUS = ((Purged, 410), (NotFound, 404), (Conflict, 409), (InvalidValue, 422))


async def _store_error(request: Request, exc: Exception) -> JSONResponse:
    status = next((code for kind, code in _STORE_STATUS if isinstance(exc, kind)), 503)
    return error_response(status, str(exc))


async def _client_gone(request: Request, exc: Exception) -> JSONResponse:
    """The client hung up while sending its body: nobody reads the answer, and the server did nothing wrong."""
    log.info("client went away while sending its request body: %s %s", request.method, request.url.path)
    return error_response(400, "the request body ended early: the client disconnected")


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return error_response(500, f"internal server error ({type(exc).__name__}); the server log has the details")


class BodyLimit:
    """Refuse request bodies over `max_bytes` with 413, before a route reads them.

    A declared Content-Length is checked up front; a chunked body is counted as it arrives and buffered (it is
    under the limit by then) for the route.
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_bytes):
            await self._refuse(scope, receive, send, declared.decode(errors="replace"))
            return
        if declared is not None or headers.get(b"transfer-encoding") is None:
            await self.app(scope, receive, send)
            return
        body = await _read_body(receive, self.max_bytes)
        if len(body) > self.max_bytes:
            await self._refuse(scope, receive, send, f"more than {len(body)}")
            return
        await self.app(scope, _replaying(body, receive), send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, size: str) -> None:
        message = (
            f"request body of {size} bytes is over this server's limit of {self.max_bytes} bytes "
            "(max_body_bytes in the server config)"
        )
        await error_response(413, message, headers={"Connection": "close"})(scope, receive, send)


class ApiNestingLimit:
    """ASGI middleware: a 400 for an `/api` JSON body past the depth limit (json_depth.py), before FastAPI parses it.

    Installed inside BodyLimit, so the body it buffers is already known to be under the size limit.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/api/") or scope["method"] == "GET":
            await self.app(scope, receive, send)
            return
        raw = await _read_body(receive)
        try:
            check_raw_depth(raw, "the request body")
        except TooDeep as exc:
            await error_response(400, str(exc))(scope, receive, send)
            return
        await self.app(scope, _replaying(raw, receive), send)


async def _read_body(receive: Receive, max_bytes: float = math.inf) -> bytes:
    """The request body, read to its end or until it passes `max_bytes` (then what was read so far)."""
    body = bytearray()
    while len(body) <= max_bytes:
        message = await receive()
        if message["type"] != "http.request":
            break
        body += message.get("body", b"")
        if not message.get("more_body", False):
            break
    return bytes(body)


def _replaying(body: bytes, receive: Receive) -> Receive:
    """A `receive` that hands the app the body a middleware already read, then the rest of the connection."""
    replay: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]

    async def replayed() -> Message:
        return replay.pop() if replay else await receive()

    return replayed


def install_error_handlers(app: FastAPI, config: ServerConfig) -> None:
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(ValidationError, _validation_error)
    app.add_exception_handler(StoreError, _store_error)
    app.add_exception_handler(ClientDisconnect, _client_gone)
    app.add_exception_handler(Exception, _unexpected)
    app.add_middleware(ApiNestingLimit)  # inside BodyLimit: bodies it reads are under the size limit
    app.add_middleware(BodyLimit, max_bytes=config.max_body_bytes)
