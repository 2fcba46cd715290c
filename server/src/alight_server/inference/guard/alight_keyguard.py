"""An ASGI guard for inference servers: every route needs a bearer key, except /health.

Standard library only: vLLM loads it from its own interpreter, where alight is not installed, as
`--middleware alight_keyguard.KeyGuard` with this folder on its PYTHONPATH (inference/vllm_server.py).
Which key opens which route, and why vLLM's own `--api-key` is not enough: docs/inference.md "Servers and keys".
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import posixpath
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

API_KEY_ENV = "ALIGHT_VLLM_API_KEY"
ADMIN_KEY_ENV = "ALIGHT_VLLM_ADMIN_KEY"
# Under /v1 but the weight updater's (with VLLM_ALLOW_RUNTIME_LORA_UPDATING): only the admin key opens them.
WEIGHT_ROUTES_IN_V1 = frozenset({"/v1/load_lora_adapter", "/v1/unload_lora_adapter"})

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


def _digest(key: str | bytes) -> bytes:
    return hashlib.sha256(key.encode() if isinstance(key, str) else key).digest()


class KeyGuard:
    """`KeyGuard(app, api_key, admin_key=None, open_paths=("/health",))`; no keys given: from the environment."""

    def __init__(
        self,
        app: App,
        api_key: str | None = None,
        admin_key: str | None = None,
        open_paths: tuple[str, ...] = ("/health",),
    ) -> None:
        if api_key is None and admin_key is None:  # loaded by vLLM's --middleware, which passes no arguments
            api_key, admin_key = os.environ.get(API_KEY_ENV), os.environ.get(ADMIN_KEY_ENV)
        if not api_key:
            # Refuse to start rather than serve with the routes open (or with an empty key).
            raise RuntimeError(f"alight_keyguard.KeyGuard needs an API key: set {API_KEY_ENV}")
        self.app = app
        self.open_paths = frozenset(open_paths)
        self._api = _digest(api_key)
        self._admin = _digest(admin_key) if admin_key else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):  # lifespan: nothing to guard
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        root = scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root) :] or "/"
        if path in self.open_paths or self._opens(scope, path):
            await self.app(scope, receive, send)
            return
        await _refuse(scope, send, path)

    def _opens(self, scope: Scope, path: str) -> bool:
        values = [value for name, value in scope.get("headers", ()) if name.lower() == b"authorization"]
        if len(values) != 1:  # none, or several that routes might read differently: refused
            return False
        scheme, _, key = values[0].partition(b" ")
        if scheme.lower() != b"bearer" or not key:
            return False
        given = _digest(key.strip())
        # Both comparisons always run: which key matched (or that none did) takes the same time.
        is_admin = self._admin is not None and hmac.compare_digest(given, self._admin)
        is_api = hmac.compare_digest(given, self._api)
        # The API key opens /v1/... as written, not a path that dot segments lead elsewhere from.
        in_v1 = path.startswith("/v1/") and posixpath.normpath(path) == path and path not in WEIGHT_ROUTES_IN_V1
        return is_admin or (is_api and in_v1)


async def _refuse(scope: Scope, send: Send, path: str) -> None:
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 1008})  # policy violation, before accepting
        return
    message = f"{path} needs 'Authorization: Bearer <key>' with this server's key"
    body = json.dumps({"error": {"message": message, "type": "authentication_error", "param": None,
                                 "code": "invalid_api_key"}}).encode()  # fmt: skip
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
               (b"www-authenticate", b"Bearer")]  # fmt: skip
    await send({"type": "http.response.start", "status": 401, "headers": headers})
    await send({"type": "http.response.body", "body": body})
