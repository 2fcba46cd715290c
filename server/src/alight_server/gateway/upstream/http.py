"""The upstream HTTP client: one pooled aiohttp session per event loop, behind the small interface the proxy uses.

aiohttp is the fastest maintained asyncio HTTP client here (keep-alive pool, C parser). Its errors become
UpstreamConnectionError so the proxy's retry policy sees one kind of transport failure.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

import aiohttp
import orjson

# Idle connections are dropped before common servers' own keep-alive timeout (uvicorn's, and so
# vLLM's, is 5 s), so a pooled connection is rarely one the server is closing as we reuse it.
KEEPALIVE_S = 4.0


class UpstreamConnectionError(Exception):
    """The upstream could not be reached, or broke the connection or the HTTP protocol mid-answer."""


def _transport_error(exc: Exception) -> UpstreamConnectionError:
    if isinstance(exc, aiohttp.ClientConnectorError):
        return UpstreamConnectionError(f"cannot connect to {exc.host}:{exc.port} ({exc.os_error})")
    if isinstance(exc, aiohttp.ClientPayloadError):
        return UpstreamConnectionError(f"the connection broke before the answer ended ({exc})")
    if isinstance(exc, aiohttp.ClientResponseError):
        return UpstreamConnectionError(f"malformed HTTP answer ({exc.message})")
    return UpstreamConnectionError(f"{type(exc).__name__}: {exc}")


class HttpResponse:
    """One answer: status and headers at once, then its body whole (`read`) or as it arrives (`chunks`)."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response
        self.status = response.status
        self.headers: Mapping[str, str] = response.headers

    async def read(self) -> bytes:
        try:
            return await self._response.read()
        except aiohttp.ClientError as exc:
            raise _transport_error(exc) from exc
        finally:
            self._response.release()

    async def chunks(self, deadline: float) -> AsyncIterator[bytes]:
        """The body as it arrives (whatever has arrived, per step); TimeoutError past `deadline` (time.monotonic)."""
        content = self._response.content
        while True:
            try:
                async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                    piece = await content.readany()
            except aiohttp.ClientError as exc:
                raise _transport_error(exc) from exc
            if not piece:
                return
            yield piece

    def close(self) -> None:
        """Done with this answer; a connection with unread body left is closed, not reused."""
        self._response.close()


class UpstreamHttp:
    """An aiohttp session for the event loop that uses it (sessions are bound to their loop)."""

    def __init__(self) -> None:
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _session_for_loop(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is None or self._session.closed or loop is not self._loop:
            # No connection cap (the pause gate bounds concurrency), no cookie jar, no decompression (relayed as is).
            connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=KEEPALIVE_S, enable_cleanup_closed=True)
            self._session = aiohttp.ClientSession(
                connector=connector, auto_decompress=False, cookie_jar=aiohttp.DummyCookieJar()
            )
            self._loop = loop
        return self._session

    async def request(self, method: str, url: str, headers: Mapping[str, str], body: bytes = b"") -> HttpResponse:
        """Send one request; returns once the answer's status and headers arrived."""
        for name, value in headers.items():
            if "\r" in value or "\n" in value:
                raise UpstreamConnectionError(f"header {name!r} for {url} holds a line break")
        # Bodies are relayed and parsed as they come (auto_decompress off), so ask for them uncompressed;
        # naming the header beats aiohttp's skip_auto_headers, which costs a multidict build per request.
        headers = {**headers, "accept-encoding": "identity"}
        try:
            response = await self._session_for_loop().request(method, url, headers=headers, data=body or None)
        except aiohttp.ClientError as exc:
            raise _transport_error(exc) from exc
        return HttpResponse(response)

    async def get_json(self, url: str, headers: dict[str, str], timeout_s: float) -> Any:
        async with asyncio.timeout(timeout_s):
            response = await self.request("GET", url, headers)
            return orjson.loads(await response.read())

    async def aclose(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None
