"""When a request reached the server: a uvicorn HTTP protocol that stamps it into the ASGI scope.

A handler's own clock starts when its task first runs, after the connection was
accepted, the bytes read and parsed, and the task queued behind every other one
on the event loop. Under load that wait is most of what a client feels, and no
handler-side timer sees it. This protocol records the earliest moment the
server process sees a request: the accept, for a connection's first request;
the first byte of the request, for the next ones on a kept-alive connection.
(Time spent in the kernel's accept queue or socket buffer stays invisible.)
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import MutableMapping
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

ARRIVED = "alight.arrived"  # scope key: time.perf_counter() at arrival


def arrived_at(scope: MutableMapping[str, Any]) -> float | None:
    """The request's arrival as stamped by StampedHttp; None under another server."""
    return scope.get(ARRIVED)


class StampedHttp(HttpToolsProtocol):
    """uvicorn's httptools protocol, plus the arrival stamp (`uvicorn.run(app, http=StampedHttp)`)."""

    _accepted: float | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._accepted = time.perf_counter()
        super().connection_made(transport)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        at, self._accepted = self._accepted, None
        self.scope[ARRIVED] = at if at is not None else time.perf_counter()  # type: ignore[literal-required]
