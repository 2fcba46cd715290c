"""Agents that disconnect mid-call: the gateway cancels the upstream request and records the call as client_gone.

The server never tells a handler that its client left, only `receive` does; a stream already stops then
(reply.py), a non-streamed call needs this watch. docs/gateway.md "Capture".
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from alight_server.gateway.reply import CLIENT_GONE, Receive, disconnected


class DisconnectWatch:
    """Cancels the task that read the body when its client disconnects; `gone` says it happened."""

    def __init__(self, receive: Receive) -> None:
        self.receive = receive
        self.gone = False
        self._owner: asyncio.Task[object] | None = None
        self._watcher: asyncio.Task[None] | None = None

    def after(self, read: Callable[[], Awaitable[bytes]]) -> Callable[[], Awaitable[bytes]]:
        """`read`, then watching starts: before the whole body is in, `receive` is the body's."""

        async def read_then_watch() -> bytes:
            body = await read()
            self._owner = asyncio.current_task()
            self._watcher = asyncio.ensure_future(self._watch())
            return body

        return read_then_watch

    async def _watch(self) -> None:
        await disconnected(self.receive)
        self.gone = True
        assert self._owner is not None
        self._owner.cancel(CLIENT_GONE)

    def stop(self) -> None:
        """Stop listening (before the reply goes out: a stream's sender listens for itself)."""
        if self._watcher is not None and not self._watcher.done():
            self._watcher.cancel()

    async def settle(self) -> None:
        """After the client left: take back the cancellation it caused, delivered or still pending."""
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(0)
        if self._owner is not None:
            self._owner.uncancel()
