"""When a request reached the server: a uvicorn HTTP protocol that stamps it into the ASGI scope.

The accept for a connection's first request, the first byte for the next ones on a kept-alive connection: what
the handler's own clock misses (docs/gateway.md "Metrics", `alight_gateway_response_start_seconds`).
"""

from __future__ import annotations

import asyncio
import time

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

ARRIVED = "alight.arrived"  # scope key: time.perf_counter() at arrival (absent under another server)


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
