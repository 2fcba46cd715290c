"""The gateway's background read of the store, so that no model call waits on one.

It carries the changes the app's hooks (hooks.py) do not see: another replica's, a controller's or a trainer's.
What one read brings and where it goes: docs/gateway.md "The lone call" (no call waits on a store read).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import anyio.to_thread

from alight.schemas import GatewaySync
from alight_server.gateway.callers import AttemptResolver
from alight_server.gateway.pause.replica_sync import Replicas
from alight_server.gateway.upstream.pool import REFRESH_S, UpstreamPool
from alight_server.store.base import Store

log = logging.getLogger("alight.gateway")

# Without a successful read for this long the caches stop trusting what they hold.
STALE_AFTER_S = 2.0


@dataclass
class StoreSync:
    store: Store
    replicas: Replicas
    attempts: AttemptResolver
    upstreams: UpstreamPool
    learn_version: Callable[[int], None]
    sync_s: float
    _seq: int | None = field(default=None, init=False)  # the rollout seq read last: changes after it are still to come
    _synced_at: float = field(default=float("-inf"), init=False)
    _task: asyncio.Task[None] | None = field(default=None, init=False)

    def following(self) -> bool:
        """True while the reads succeed: every change to the store reaches the caches within `sync_s`."""
        return time.monotonic() - self._synced_at < STALE_AFTER_S

    async def start(self) -> None:
        """Join the replicas' shared pause, take what the store holds now, and follow it from here."""
        seen = await anyio.to_thread.run_sync(self.store.gateway_sync, None)
        self._take(seen)
        await self.replicas.start(seen.pause)
        await self.upstreams.reload()
        self._synced_at = time.monotonic()
        self._task = asyncio.create_task(self._follow(), name="alight-gateway-store-sync")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self.replicas.stop()

    async def sync(self) -> None:
        """One round: read and apply, reload the upstreams when due, report this replica."""
        seen = await anyio.to_thread.run_sync(self.store.gateway_sync, self._seq)
        self._take(seen)
        await self.replicas.apply(seen.pause)
        if self.upstreams.age() >= REFRESH_S:
            await self.upstreams.reload()
        await self.replicas.report()
        self._synced_at = time.monotonic()  # only a whole round counts: each part keeps a cache current

    def _take(self, seen: GatewaySync) -> None:
        """The rollouts that changed lose their cached attempt state; the version moves on."""
        if seen.changed is None:  # not known one by one (the first read, or a burst of changes)
            self.attempts.forget_all()
        else:
            for rollout_id in seen.changed:
                self.attempts.forget(rollout_id)
        self.learn_version(seen.policy_version)
        self._seq = seen.rollout_seq

    async def _follow(self) -> None:
        while True:
            await asyncio.sleep(self.sync_s)
            try:
                await self.sync()
            except Exception as exc:  # a store hiccup: keep the current state and try again
                log.warning("gateway store sync failed (%s: %s); retrying", type(exc).__name__, exc)
