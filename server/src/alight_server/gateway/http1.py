"""The upstream HTTP client: pooled keep-alive HTTP/1.1 connections, parsed by httptools.

Upstream calls are the gateway's hottest I/O: each is one `write` of the
request and one C parser pass over the answer, with no per-request session,
cookie, tracing or header machinery. Connections are kept per origin and
reused; a connection whose answer was not read to the end is closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import urlsplit

import httptools
import orjson

# Idle keep-alive connections older than this are closed rather than reused (servers drop them).
KEEPALIVE_S = 30.0
# Idle connections kept per origin; beyond this a finished connection is closed.
MAX_IDLE_PER_ORIGIN = 256
# A stream's unread body above this pauses reading from the upstream until the relay catches up.
MAX_BUFFERED = 1 << 20


class UpstreamConnectionError(Exception):
    """The upstream could not be reached, or broke the connection or the HTTP protocol mid-answer."""


@dataclass(frozen=True)
class _Origin:
    scheme: str
    host: str
    port: int
    path: str  # the URL's path and query, sent as the request target
    host_header: str

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.scheme, self.host, self.port)


def _origin(url: str) -> _Origin:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UpstreamConnectionError(f"upstream URL {url!r} is not an http(s) URL with a host")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    default = port == (443 if parts.scheme == "https" else 80)
    host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
    return _Origin(parts.scheme, parts.hostname, port, target, host if default else f"{host}:{port}")


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError())


class HttpResponse:
    """One answer: status and headers once they arrived, then its body whole (`read`) or in pieces."""

    def __init__(self, conn: _Connection) -> None:
        self._conn = conn
        self.status = 0
        self.headers: dict[str, str] = {}
        self._chunks: list[bytes] = []
        self._buffered = 0
        self._head_done = False
        self._done = False
        self._error: UpstreamConnectionError | None = None
        self._waiter: asyncio.Future[None] | None = None

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    async def _wait(self, deadline: float | None = None) -> None:
        """Until the connection has news for this answer; TimeoutError past `deadline` (time.monotonic)."""
        loop = asyncio.get_running_loop()
        waiter = self._waiter = loop.create_future()
        if deadline is None:
            await waiter
            return
        # A timer, not wait_for: no task per wait on a stream's every piece.
        timer = loop.call_later(max(0.0, deadline - time.monotonic()), _expire, waiter)
        try:
            await waiter
        finally:
            timer.cancel()

    async def head(self) -> None:
        while not self._head_done:
            if self._error is not None:
                raise self._error
            await self._wait()

    async def read(self) -> bytes:
        try:
            while not self._done:
                if self._error is not None:
                    raise self._error
                await self._wait()
        except BaseException:
            self.close()  # cancelled (a deadline) or broken half-way: the connection cannot be reused
            raise
        chunks, self._chunks = self._chunks, []
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    async def chunks(self, deadline: float | None = None) -> AsyncIterator[bytes]:
        """The body as it arrives (what has arrived, joined, per step); TimeoutError past `deadline`."""
        while True:
            if self._chunks:
                chunks, self._chunks, self._buffered = self._chunks, [], 0
                self._conn.resume()
                yield b"".join(chunks)
            elif self._done:
                return
            elif self._error is not None:
                raise self._error
            else:
                await self._wait(deadline)

    def close(self) -> None:
        """Done with this answer; a connection with unread body left is closed, not reused."""
        if not self._done:
            self._conn.abort()


class _Connection(asyncio.Protocol):
    """One keep-alive connection carrying one request at a time."""

    def __init__(self, pool: UpstreamHttp, key: tuple[str, str, int]) -> None:
        self.pool = pool
        self.key = key
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.response: HttpResponse | None = None
        self.closed = False
        self.reading_paused = False
        self.idle_since = 0.0

    def send(self, data: bytes) -> HttpResponse:
        assert self.transport is not None
        self.response = HttpResponse(self)
        self.transport.write(data)
        return self.response

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def resume(self) -> None:
        if self.reading_paused and self.transport is not None and not self.closed:
            self.reading_paused = False
            self.transport.resume_reading()

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports do not subclass asyncio's

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(f"answered with malformed HTTP ({exc})")

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        response = self.response
        if response is None or response._done:
            return
        if response._head_done and not self._framed():
            self.on_message_complete()  # a body delimited by the connection's end
        else:
            self._fail("closed the connection before the answer ended" + (f" ({exc})" if exc else ""))

    def _framed(self) -> bool:
        assert self.response is not None
        headers = self.response.headers
        return "content-length" in headers or "chunked" in headers.get("transfer-encoding", "").lower()

    def _fail(self, why: str) -> None:
        self.abort()
        response = self.response
        if response is not None and not response._done and response._error is None:  # the first cause wins
            response._error = UpstreamConnectionError(why)
            response._wake()

    # httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        assert self.response is not None
        self.response.headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        response = self.response
        assert response is not None
        response.status = self.parser.get_status_code()
        response._head_done = True
        response._wake()

    def on_body(self, body: bytes) -> None:
        response = self.response
        assert response is not None
        response._chunks.append(body)
        response._buffered += len(body)
        if response._buffered > MAX_BUFFERED and not self.reading_paused and self.transport is not None:
            self.reading_paused = True
            self.transport.pause_reading()
        response._wake()

    def on_message_complete(self) -> None:
        response = self.response
        assert response is not None
        response._done = True
        response._wake()
        if self.closed or not self.parser.should_keep_alive():
            self.abort()
        else:
            self.pool._release(self)


class UpstreamHttp:
    """Connection pools per upstream origin, for the event loop that uses them."""

    def __init__(self) -> None:
        self._idle: dict[tuple[str, str, int], list[_Connection]] = {}
        self._origins: dict[str, _Origin] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ssl: ssl.SSLContext | None = None

    async def request(self, method: str, url: str, headers: dict[str, str], body: bytes = b"") -> HttpResponse:
        """Send one request; returns once the answer's status and headers arrived."""
        origin = self._origins.get(url)
        if origin is None:
            origin = self._origins[url] = _origin(url)
        head = f"{method} {origin.path} HTTP/1.1\r\nhost: {origin.host_header}\r\n"
        for name, value in headers.items():
            if "\r" in value or "\n" in value:
                raise UpstreamConnectionError(f"header {name!r} for {url} holds a line break")
            head += f"{name}: {value}\r\n"
        data = f"{head}content-length: {len(body)}\r\n\r\n".encode("latin-1") + body
        conn = self._take(origin.key)
        if conn is not None:
            try:
                return await self._exchange(conn, data)
            except UpstreamConnectionError:
                if conn.response is not None and conn.response._head_done:
                    raise
                # The server dropped the idle connection as it was reused: once more on a new one.
        return await self._exchange(await self._connect(origin), data)

    async def _exchange(self, conn: _Connection, data: bytes) -> HttpResponse:
        try:
            response = conn.send(data)
            await response.head()
        except BaseException:
            conn.abort()  # cancelled or failed half-way: the connection's state is unknown
            raise
        return response

    def _take(self, key: tuple[str, str, int]) -> _Connection | None:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # connections belong to the loop that opened them
            self._drop_idle()
            self._loop = loop
        idle = self._idle.get(key)
        now = loop.time()
        while idle:
            conn = idle.pop()
            if not conn.closed and now - conn.idle_since < KEEPALIVE_S:
                return conn
            conn.abort()
        return None

    def _release(self, conn: _Connection) -> None:
        idle = self._idle.setdefault(conn.key, [])
        if len(idle) >= MAX_IDLE_PER_ORIGIN:
            conn.abort()
            return
        conn.response = None
        conn.idle_since = asyncio.get_running_loop().time()
        idle.append(conn)

    async def _connect(self, origin: _Origin) -> _Connection:
        loop = asyncio.get_running_loop()
        tls: ssl.SSLContext | None = None
        if origin.scheme == "https":
            tls = self._ssl = self._ssl or ssl.create_default_context()
        try:
            _, conn = await loop.create_connection(
                lambda: _Connection(self, origin.key), origin.host, origin.port, ssl=tls
            )
        except OSError as exc:
            raise UpstreamConnectionError(f"cannot connect to {origin.host}:{origin.port} ({exc})") from exc
        return conn

    def _drop_idle(self) -> None:
        for idle in self._idle.values():
            for conn in idle:
                with contextlib.suppress(RuntimeError):  # its loop is already closed
                    conn.abort()
        self._idle = {}

    async def get_json(self, url: str, headers: dict[str, str], timeout_s: float) -> Any:
        async with asyncio.timeout(timeout_s):
            response = await self.request("GET", url, headers)
            return orjson.loads(await response.read())

    async def aclose(self) -> None:
        self._drop_idle()
