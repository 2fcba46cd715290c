"""Gateway replicas: every gateway process on one store pauses, drains and resumes together."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable

import anyio.to_thread

from alight.schemas import GatewayPause, GatewayReplica
from alight_server.gateway.pause.gate import DrainResult, PauseGate
from alight_server.store.base import Store

log = logging.getLogger("alight.gateway")

# An open replica reports itself this often (a paused one at every change of its in-flight count).
REPORT_EVERY_S = 1.0
# A replica silent this long has stopped (its calls went with it): drains no longer wait for it.
STALE_AFTER_S = 5.0


class Replicas:
    """This gateway as one of the processes serving from a store, and the pause they share.

    The pause lives in the store. Each replica reads it every `sync_s`,
    applies it to its own PauseGate, and reports back the pause epoch it
    applied and its calls in flight, so `drain` on any replica waits for the
    calls of all of them. Alone on its store a replica behaves as a single
    gateway: its own pause takes effect at once and drain waits only for it.
    """

    def __init__(self, store: Store, gate: PauseGate, reopen: Callable[[], Awaitable[None]], sync_s: float) -> None:
        self.store = store
        self.gate = gate
        self.reopen = reopen  # re-reads what a resume elsewhere may have changed, before calls are admitted
        self.sync_s = sync_s
        self.id = uuid.uuid4().hex[:16]
        self.address = f"{socket.gethostname()}:{os.getpid()}"
        self.epoch = -1  # the newest pause epoch applied here
        self._reported: tuple[int, bool, int] | None = None
        self._reported_at = float("-inf")
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Join the shared pause and follow it. A pause whose replicas have all stopped lapses."""
        state = await anyio.to_thread.run_sync(self.store.gateway_pause)
        if state.paused and not await self.others():
            log.warning("the gateway pause outlived every gateway that shared it; starting open")
            state = await anyio.to_thread.run_sync(self.store.set_gateway_paused, False)
        await self._apply(state)
        await self._report(force=True)
        self._task = asyncio.create_task(self._follow(), name="alight-gateway-replicas")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
            with contextlib.suppress(Exception):  # the store may be gone already; the report goes stale then
                await anyio.to_thread.run_sync(self.store.remove_gateway_replica, self.id)

    async def pause(self) -> None:
        """New calls get 429 here at once, on the other replicas within `sync_s`."""
        self.gate.pause()
        self.epoch = max(self.epoch, (await anyio.to_thread.run_sync(self.store.set_gateway_paused, True)).epoch)
        await self._report(force=True)

    async def resume(self) -> float:
        """Open every replica (the others within `sync_s`); returns how long this one was paused."""
        self.epoch = max(self.epoch, (await anyio.to_thread.run_sync(self.store.set_gateway_paused, False)).epoch)
        paused_s = self.gate.resume()
        await self._report(force=True)
        return paused_s

    async def drain(self, timeout_s: float) -> DrainResult:
        """Wait until no replica has a call in flight and each has applied this replica's pause epoch."""
        started = time.monotonic()
        others = await self.others()
        at_start = self.gate.in_flight + sum(r.in_flight for r in others)
        local = await self.gate.drain(timeout_s)
        while True:
            pending = [r for r in await self.others() if r.pause_epoch < self.epoch or r.in_flight > 0]
            if not pending or time.monotonic() - started >= timeout_s:
                break
            await asyncio.sleep(min(self.sync_s, max(0.0, timeout_s - (time.monotonic() - started))))
        return DrainResult(
            drained=local.drained and not pending,
            in_flight_at_start=at_start,
            waited_s=time.monotonic() - started,
            replicas=1 + len(others),
        )

    async def others(self) -> list[GatewayReplica]:
        """The other replicas that reported lately."""
        now = time.time()
        found = await anyio.to_thread.run_sync(self.store.list_gateway_replicas)
        return [r for r in found if r.id != self.id and now - r.reported_at < STALE_AFTER_S]

    async def _follow(self) -> None:
        while True:
            await asyncio.sleep(self.sync_s)
            try:
                await self._apply(await anyio.to_thread.run_sync(self.store.gateway_pause))
                await self._report()
            except Exception as exc:  # a store hiccup: keep the current state and try again
                log.warning("gateway replica sync failed (%s: %s); retrying", type(exc).__name__, exc)

    async def _apply(self, state: GatewayPause) -> None:
        if state.epoch <= self.epoch:  # read before a change this replica made itself
            return
        if not state.paused and self.gate.paused:
            await self.reopen()
            if state.epoch <= self.epoch:  # a newer pause or resume was applied meanwhile
                return
        self.epoch = state.epoch
        if state.paused:
            self.gate.pause()
        else:
            self.gate.resume()

    async def _report(self, *, force: bool = False) -> None:
        snapshot = (self.epoch, self.gate.paused, self.gate.in_flight)
        now = time.time()
        # While open, in-flight counts change all the time and nobody waits on them: report once a second.
        changed = snapshot != self._reported and self.gate.paused
        if not (force or changed or now - self._reported_at >= REPORT_EVERY_S):
            return
        report = GatewayReplica(
            id=self.id,
            address=self.address,
            pause_epoch=snapshot[0],
            paused=snapshot[1],
            in_flight=snapshot[2],
            reported_at=now,
        )
        await anyio.to_thread.run_sync(self.store.report_gateway_replica, report)
        self._reported, self._reported_at = snapshot, now
