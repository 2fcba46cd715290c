"""The gateway's upstream HTTP client against real loopback servers: reuse, framing, failures, deadlines."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest

from alight_server.gateway.upstream.http import UpstreamConnectionError, UpstreamHttp

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@asynccontextmanager
async def _server(handler: Handler) -> AsyncIterator[tuple[str, list[int]]]:
    """A raw TCP server on a free port; yields its base URL and the client ports it saw (one per connection)."""
    peers: list[int] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peers.append(writer.get_extra_info("peername")[1])
        try:
            await handler(reader, writer)
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        yield f"http://127.0.0.1:{port}", peers


async def _read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        (int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")), 0
    )
    return head + await reader.readexactly(length)


def _answer(raw: bytes, seen: list[bytes] | None = None) -> Handler:
    """Read one request (kept in `seen`), then write `raw` as the whole answer."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await _read_request(reader)
        if seen is not None:
            seen.append(request)
        writer.write(raw)
        await writer.drain()

    return handler


def _keep_alive(body: bytes, times: int) -> Handler:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for _ in range(times):
            request = await _read_request(reader)
            echo = body + b" " + request.split(b" ")[1]
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(echo), echo))
            await writer.drain()

    return handler


async def test_connections_are_reused_and_bodies_match_the_request():
    http = UpstreamHttp()
    async with _server(_keep_alive(b"hello", 3)) as (url, peers):
        for i in range(3):
            response = await http.request("POST", f"{url}/v1/x?i={i}", {"content-type": "application/json"}, b"{}")
            assert response.status == 200
            assert await response.read() == f"hello /v1/x?i={i}".encode()
    assert len(peers) == 1  # one keep-alive connection carried all three
    await http.aclose()


async def test_a_dropped_idle_connection_is_replaced_transparently():
    http = UpstreamHttp()
    async with _server(_keep_alive(b"ok", 1)) as (url, peers):  # closes after each answer
        for _ in range(3):
            response = await http.request("GET", f"{url}/m", {})
            assert await response.read() == b"ok /m"
            await asyncio.sleep(0.05)  # let the close arrive (or not: a stale reuse must retry)
    assert len(peers) == 3
    await http.aclose()


async def test_chunked_and_connection_delimited_bodies():
    async def chunked(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n")
        await writer.drain()
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nuntil the end")  # no length: ends at close
        await writer.drain()

    http = UpstreamHttp()
    async with _server(chunked) as (url, _):
        assert await (await http.request("GET", f"{url}/a", {})).read() == b"abcde"
        assert await (await http.request("GET", f"{url}/b", {})).read() == b"until the end"
    await http.aclose()


async def test_garbage_refused_and_cut_answers_are_connection_errors():
    garbage = _answer(b"this is not http\r\n\r\n")
    cut = _answer(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nonly part")
    http = UpstreamHttp()
    async with _server(garbage) as (url, _):
        with pytest.raises(UpstreamConnectionError, match="malformed HTTP"):
            await http.request("GET", f"{url}/", {})
    async with _server(cut) as (url, _):
        response = await http.request("GET", f"{url}/", {})
        with pytest.raises(UpstreamConnectionError, match="before the answer ended"):
            await response.read()
    with pytest.raises(UpstreamConnectionError, match="cannot connect"):
        await http.request("GET", f"{url}/", {})  # the server is gone
    with pytest.raises(UpstreamConnectionError, match="line break"):
        await http.request("GET", f"{url}/", {"authorization": "Bearer x\r\nevil: 1"})
    await http.aclose()


async def test_a_stalled_stream_times_out_at_its_deadline():
    async def stall(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nfirst\r\n")
        await writer.drain()
        await asyncio.sleep(5)

    http = UpstreamHttp()
    async with _server(stall) as (url, _):
        response = await http.request("POST", f"{url}/s", {}, b"{}")
        pieces = []
        began = time.monotonic()
        with pytest.raises(TimeoutError):
            async for piece in response.chunks(deadline=time.monotonic() + 0.3):
                pieces.append(piece)
        assert pieces == [b"first"] and time.monotonic() - began < 2
        response.close()
    await http.aclose()


async def test_requests_ask_for_an_uncompressed_body():
    """The body is relayed and parsed as it comes, so the upstream is told not to compress it."""
    seen: list[bytes] = []
    http = UpstreamHttp()
    async with _server(_answer(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}", seen)) as (url, _):
        response = await http.request("POST", f"{url}/v1/x", {"content-type": "application/json"}, b"{}")
        assert await response.read() == b"{}"
    await http.aclose()
    head = seen[0].split(b"\r\n\r\n")[0].lower().split(b"\r\n")
    assert [line for line in head if line.startswith(b"accept-encoding")] == [b"accept-encoding: identity"]
