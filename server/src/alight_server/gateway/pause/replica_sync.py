"""Gateway replicas: every gateway process on one store pauses, drains and resumes together (all policies or one)."""

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
    """This gateway as one of the processes serving from a store, and the pause they share (in the store).

    The store sync hands each read of the pause to `apply`; `report` writes back the epoch applied and the
    calls in flight. docs/gateway.md "Several gateway processes on one store".
    """

    def __init__(self, store: Store, gate: PauseGate, reopen: Callable[[], Awaitable[None]], sync_s: float) -> None:
        self.store = store
        self.gate = gate
        self.reopen = reopen  # re-reads what a resume elsewhere may have changed, before calls are admitted
        self.sync_s = sync_s
        self.id = uuid.uuid4().hex[:16]
        self.address = f"{socket.gethostname()}:{os.getpid()}"
        self.epoch = -1  # the newest pause epoch applied here
        self._reported: tuple[object, ...] | None = None
        self._reported_at = float("-inf")
        self._joined = False

    async def start(self, state: GatewayPause) -> None:
        """Join the shared pause as the store has it now. A pause whose replicas have all stopped lapses."""
        if (state.paused or state.policies) and not await self.others():
            log.warning("the gateway pause outlived every gateway that shared it; starting open")
            for policy in state.policies:
                await anyio.to_thread.run_sync(self.store.set_gateway_paused, False, policy)
            state = await anyio.to_thread.run_sync(self.store.set_gateway_paused, False)
        await self.apply(state)
        await self.report(force=True)
        self._joined = True

    async def stop(self) -> None:
        if self._joined:
            self._joined = False
            with contextlib.suppress(Exception):  # the store may be gone already; the report goes stale then
                await anyio.to_thread.run_sync(self.store.remove_gateway_replica, self.id)

    async def pause(self, policy: str | None = None) -> None:
        """New calls (of `policy` only, when given) get 429 here at once, on the other replicas within `sync_s`."""
        self.gate.pause(policy)
        state = await anyio.to_thread.run_sync(self.store.set_gateway_paused, True, policy)
        self.epoch = max(self.epoch, state.epoch)
        await self.report(force=True)

    async def resume(self, policy: str | None = None) -> float:
        """Open every replica (or `policy`'s calls; the others within `sync_s`); returns how long this one was
        paused."""
        state = await anyio.to_thread.run_sync(self.store.set_gateway_paused, False, policy)
        self.epoch = max(self.epoch, state.epoch)
        paused_s = self.gate.resume(policy)
        await self.report(force=True)
        return paused_s

    async def drain(self, timeout_s: float, policy: str | None = None) -> DrainResult:
        """Wait until no replica has a call (of `policy`, when given) in flight and each has applied this
        replica's pause epoch."""

        def busy(r: GatewayReplica) -> int:
            return r.in_flight if policy is None else r.in_flight_by_policy.get(policy, 0)

        started = time.monotonic()
        others = await self.others()
        at_start = self.gate.busy(policy) + sum(busy(r) for r in others)
        local = await self.gate.drain(timeout_s, policy)
        while True:
            pending = [r for r in await self.others() if r.pause_epoch < self.epoch or busy(r) > 0]
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

    async def apply(self, state: GatewayPause) -> None:
        """Follow the shared pause as last read from the store."""
        if state.epoch <= self.epoch:  # read before a change this replica made itself
            return
        reopened = set(self.gate.paused_policies) - set(state.policies)
        if (not state.paused and self.gate.paused) or reopened:
            await self.reopen()
            if state.epoch <= self.epoch:  # a newer pause or resume was applied meanwhile
                return
        self.epoch = state.epoch
        if state.paused:
            self.gate.pause()
        else:
            self.gate.resume()
        for policy in reopened:
            self.gate.resume(policy)
        for policy in state.policies:
            self.gate.pause(policy)

    async def report(self, *, force: bool = False) -> None:
        """Tell the other replicas this one's pause epoch and calls in flight (at least once a second)."""
        by_policy = {p: n for p, n in self.gate.in_flight_by_policy.items() if n}
        snapshot = (self.epoch, self.gate.paused, self.gate.in_flight, tuple(sorted(by_policy.items())))
        now = time.time()
        # While open, in-flight counts change all the time and nobody waits on them: report once a second.
        changed = snapshot != self._reported and (self.gate.paused or bool(self.gate.policy_paused_since))
        if not (force or changed or now - self._reported_at >= REPORT_EVERY_S):
            return
        report = GatewayReplica(
            id=self.id,
            address=self.address,
            pause_epoch=snapshot[0],
            paused=snapshot[1],
            in_flight=snapshot[2],
            reported_at=now,
            in_flight_by_policy=by_policy,
        )
        await anyio.to_thread.run_sync(self.store.report_gateway_replica, report)
        self._reported, self._reported_at = snapshot, now
