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
from alight_server.gateway.errors import GatewayError
from alight_server.store.base import Store
from alight_server.store.keys import upstream as upstream_keys

# Registrations are re-read from the store this often: by the gateway's store sync, off the
# call path, while `followed()` holds; else by the first call after that. A transport failure
# or `invalidate()` (a change through this server's API) makes the next call re-read them.
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

    When an upstream leaves only the attempts it served move; when one joins it takes over only its own share.
    """

    def __init__(
        self,
        store: Store,
        get_json: Callable[[str, dict[str, str], float], Awaitable[Any]],
        followed: Callable[[], bool] = lambda: False,
        key_sources: upstream_keys.KeySources | None = None,
    ) -> None:
        self.store = store
        # Where referenced keys may be read from (the server config's); none by default.
        self.key_sources = key_sources or upstream_keys.KeySources()
        self.get_json = get_json
        self.followed = followed  # True while the store sync reloads the list every REFRESH_S
        self._targets: list[Target] = []
        self._loaded_at = float("-inf")
        self._invalidations = 0  # a reload that raced with `invalidate` does not count as fresh
        self._lock = asyncio.Lock()
        self._model_names: dict[str, str] = {}
        # Routing order per (attempt key, served version), valid for the loaded target list.
        self._routes: dict[tuple[str, int], list[Target]] = {}

    def invalidate(self) -> None:
        self._invalidations += 1
        self._loaded_at = float("-inf")

    def age(self) -> float:
        """Seconds since the list was read (infinite once invalidated)."""
        return time.monotonic() - self._loaded_at

    async def targets(self) -> list[Target]:
        if self._loaded_at == float("-inf") or (self.age() > REFRESH_S and not self.followed()):
            await self.reload(only_if_stale=True)
        return self._targets

    async def reload(self, *, only_if_stale: bool = False) -> None:
        """Read the registrations again (one reader at a time; the calls that waited use its result)."""
        async with self._lock:
            if only_if_stale and self.age() <= REFRESH_S:
                return  # another call reloaded while this one waited for the lock
            invalidations = self._invalidations
            rows = await anyio.to_thread.run_sync(self.store.list_upstreams)
            targets = [self._target(u, self.key_sources) for u in rows]
            if targets != self._targets:
                self._routes = {}
            self._targets = targets
            if invalidations == self._invalidations:
                self._loaded_at = time.monotonic()

    @staticmethod
    def _target(u: Upstream, key_sources: upstream_keys.KeySources) -> Target:
        try:  # referenced keys are read here, at each reload: a rotated file is used within REFRESH_S
            api_key, key_error = upstream_keys.resolve(u, key_sources), None
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

        An upstream serves from its registered policy version onward (an embedded backend updates weights in place); the
        newest registration not beyond the served version wins.
        """
        targets = await self.targets()
        cached = self._routes.get((key, served_version))
        if cached is not None:
            return cached
        eligible = [t for t in targets if t.policy_version <= served_version]
        if not eligible and self.age() > 0.0:  # about to fail: one read of the store first, it may know better
            await self.reload()
            targets = self._targets
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
