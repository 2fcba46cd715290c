"""The upstream pool: registered inference endpoints, cached, with sticky per-attempt routing."""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio.to_thread

from alight.schemas import Upstream
from alight_server import upstream_keys
from alight_server.gateway.errors import GatewayError
from alight_server.store.base import Store

# Registrations are re-read from the store at most this often; a transport
# failure or `invalidate()` forces a re-read on the next call.
REFRESH_S = 1.0
# Routing orders remembered at most (one per live attempt and policy version).
MAX_CACHED_ROUTES = 65536


@dataclass(frozen=True)
class Target:
    """One upstream as the proxy uses it."""

    id: str
    base_url: str  # ends without a slash, e.g. http://host:8000/v1
    model: str | None
    policy_version: int
    api_key: str | None
    key_error: str | None = None  # why its api key cannot be read now (a 503 naming it), else None


def _score(key: str, upstream_id: str) -> bytes:
    return hashlib.blake2b(f"{key}\0{upstream_id}".encode(), digest_size=8).digest()


class UpstreamPool:
    """Rendezvous hashing keeps each attempt on one upstream (its KV cache stays warm).

    When an upstream leaves only the attempts it served move; when one joins
    it takes over only its own share.
    """

    def __init__(self, store: Store, get_json: Callable[[str, dict[str, str], float], Awaitable[Any]]) -> None:
        self.store = store
        self.get_json = get_json
        self._targets: list[Target] = []
        self._loaded_at = float("-inf")
        self._lock = asyncio.Lock()
        self._model_names: dict[str, str] = {}
        # Routing order per (attempt key, served version), valid for the loaded target list.
        self._routes: dict[tuple[str, int], list[Target]] = {}

    def invalidate(self) -> None:
        self._loaded_at = float("-inf")

    async def targets(self) -> list[Target]:
        if time.monotonic() - self._loaded_at > REFRESH_S:
            async with self._lock:
                if time.monotonic() - self._loaded_at > REFRESH_S:
                    rows = await anyio.to_thread.run_sync(self.store.list_upstreams)
                    targets = [self._target(u) for u in rows]
                    if targets != self._targets:
                        self._routes = {}
                    self._targets = targets
                    self._loaded_at = time.monotonic()
        return self._targets

    @staticmethod
    def _target(u: Upstream) -> Target:
        try:  # referenced keys are read here, at each reload: a rotated file is used within REFRESH_S
            api_key, key_error = upstream_keys.resolve(u), None
        except upstream_keys.UpstreamKeyError as exc:
            api_key, key_error = None, str(exc)
        return Target(
            id=u.id,
            base_url=u.url.rstrip("/"),
            model=u.model,
            policy_version=u.policy_version,
            api_key=api_key,
            key_error=key_error,
        )

    async def route(self, key: str, served_version: int) -> list[Target]:
        """Targets for one attempt in preference order (first is its sticky home).

        An upstream serves from its registered policy version onward (an
        embedded backend updates weights in place); the newest registration
        not beyond the served version wins.
        """
        targets = await self.targets()
        cached = self._routes.get((key, served_version))
        if cached is not None:
            return cached
        eligible = [t for t in targets if t.policy_version <= served_version]
        if not eligible:
            registered = sorted({t.policy_version for t in targets})
            hint = f"registered upstreams serve versions {registered}" if targets else "no upstream is registered"
            raise GatewayError(
                503,
                f"no upstream serves policy version {served_version}: {hint}; register one with POST /api/upstreams",
            )
        newest = max(t.policy_version for t in eligible)
        home = [t for t in eligible if t.policy_version == newest]
        ordered = sorted(home, key=lambda t: _score(key, t.id), reverse=True)
        if len(self._routes) >= MAX_CACHED_ROUTES:
            self._routes = {}
        self._routes[(key, served_version)] = ordered
        return ordered

    async def model_name(self, target: Target) -> str | None:
        """The model name to send upstream: registered, else the first one `GET /models` lists."""
        if target.model:
            return target.model
        if target.id not in self._model_names:
            try:
                data = (await self.get_json(f"{target.base_url}/models", _auth(target), 10.0)).get("data") or []
                if data:
                    self._model_names[target.id] = str(data[0]["id"])
            except Exception:  # an upstream without a usable /models: send the agent's model name
                return None
        return self._model_names.get(target.id)


def _auth(target: Target) -> dict[str, str]:
    if target.key_error is not None:
        raise GatewayError(503, target.key_error)
    return {"authorization": f"Bearer {target.api_key}"} if target.api_key else {}


def upstream_headers(target: Target) -> dict[str, str]:
    return {"content-type": "application/json", **_auth(target)}
