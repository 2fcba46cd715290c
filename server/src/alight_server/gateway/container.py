"""The gateway's collaborators: one object per app that holds what every call shares (no request logic)."""

from __future__ import annotations

import time
from collections.abc import Callable

import anyio.to_thread
import orjson

from alight_server.config import GatewayConfig
from alight_server.gateway.callers import AttemptResolver
from alight_server.gateway.capture.recorder import Recorder
from alight_server.gateway.capture.writer import CaptureWriter
from alight_server.gateway.limits.ledger import Limits
from alight_server.gateway.metrics import GatewayMetrics
from alight_server.gateway.pause.gate import PauseGate
from alight_server.gateway.pause.replica_sync import Replicas
from alight_server.gateway.store_sync import StoreSync
from alight_server.gateway.upstream.http import UpstreamHttp
from alight_server.gateway.upstream.pool import REFRESH_S, UpstreamPool
from alight_server.gateway.upstream.proxy import Proxy
from alight_server.store.base import Store
from alight_server.store.keys.upstream import KeySources


class Gateway:
    """What every call shares; the request path reads it, admin routes and hooks reach it as `app.state.gateway`."""

    def __init__(
        self,
        store: Store,
        config: GatewayConfig,
        token_secret: Callable[[], bytes],
        max_body_bytes: int,
        key_sources: KeySources | None = None,
    ) -> None:
        self.store = store
        self.config = config
        self.max_body_bytes = max_body_bytes
        self.gate = PauseGate()
        self.replicas = Replicas(store, self.gate, self._reopen, config.replica_sync_s)
        self.metrics = GatewayMetrics(lambda: self.gate.in_flight, self.gate.paused_seconds)
        self.http = UpstreamHttp()
        self.upstreams = UpstreamPool(store, self.http.get_json, followed=self._followed, key_sources=key_sources)
        self.proxy = Proxy(self.http, self.upstreams, config, self.metrics)
        self.attempts = AttemptResolver(store, token_secret, followed=self._followed)
        self.sync = StoreSync(
            store, self.replicas, self.attempts, self.upstreams, self.learn_version, config.replica_sync_s
        )
        # A call alone in flight commits on the event loop: nothing could share its transaction.
        self.writer = CaptureWriter(store, alone=lambda: self.gate.in_flight <= 1)
        self.limits = Limits(config.limits, self.metrics)
        self.recorder = Recorder(self.writer, self.metrics, self.served_version, self.limits.spent)
        self._version: int | None = None
        self._version_at = float("-inf")

    async def aclose(self) -> None:
        await self.sync.stop()
        await self.http.aclose()
        await anyio.to_thread.run_sync(self.writer.close)

    def _followed(self) -> bool:
        return self.sync.following()

    async def served_version(self) -> int:
        """The policy version calls are attributed to: as the store sync read it, else re-read like the upstreams."""
        if self._version is None or (time.monotonic() - self._version_at > REFRESH_S and not self._followed()):
            self.learn_version(await anyio.to_thread.run_sync(self.store.current_policy_version))
        assert self._version is not None
        return self._version

    def learn_version(self, version: int) -> None:
        """The store's version, as read: it only moves forward (a read from before a resume must not undo it)."""
        if self._version is None or version > self._version:
            self._version = version
        self._version_at = time.monotonic()

    def set_served_version(self, version: int) -> None:
        self._version, self._version_at = version, time.monotonic()

    async def models_listing(self) -> bytes:
        """`GET /models`: the models behind the served policy version."""
        targets = await self.upstreams.route("models", await self.served_version())
        names = dict.fromkeys([await self.upstreams.model_name(t) or t.id for t in targets])
        data = [{"id": n, "object": "model", "created": 0, "owned_by": "alight"} for n in names]
        return orjson.dumps({"object": "list", "data": data})

    async def _reopen(self) -> None:
        """Another replica resumed: calls from here on count as the version it set, on its upstreams."""
        self.set_served_version(await anyio.to_thread.run_sync(self.store.current_policy_version))
        self.upstreams.invalidate()
