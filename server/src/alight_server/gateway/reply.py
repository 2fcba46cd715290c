"""What the gateway answers an agent: one body or an event stream, sent as raw ASGI messages."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, MutableMapping
from dataclasses import dataclass
from typing import Any

import orjson

Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

JSON = b"application/json"
EVENT_STREAM = b"text/event-stream"
CLIENT_GONE = "client_gone"  # the call's flag (trainers skip flagged calls) and the error's prefix
CLIENT_GONE_STATUS = 499  # nginx's "client closed request": no reply was sent


@dataclass(slots=True)
class Reply:
    """A status and a body, or (`stream` set) a 200 whose events come from an async iterator.

    `release` runs once when a stream ends, however it ends, even if the
    stream never started (it frees the pause gate's slot and the upstream
    answer); a plain reply has nothing to release.
    """

    status: int
    body: bytes = b""
    headers: dict[str, str] | None = None
    content_type: bytes = JSON
    stream: AsyncIterator[bytes] | None = None
    release: Callable[[], None] | None = None


def sse(data: dict[str, Any], named: bool = False) -> bytes:
    """One server-sent event; `named` ones (Anthropic's, the Responses API's) carry their type as the event name."""
    head = f"event: {data['type']}\n".encode() if named else b""
    return head + b"data: " + orjson.dumps(data) + b"\n\n"


async def send_reply(reply: Reply, receive: Receive, send: Send) -> None:
    """Send `reply`; a stream stops as soon as the client disconnects."""
    headers = [(b"content-type", reply.content_type)]
    headers.extend((k.encode("latin-1"), v.encode("latin-1")) for k, v in (reply.headers or {}).items())
    if reply.stream is None:
        headers.append((b"content-length", str(len(reply.body)).encode()))
        await send({"type": "http.response.start", "status": reply.status, "headers": headers})
        await send({"type": "http.response.body", "body": reply.body})
        return
    try:
        headers.append((b"cache-control", b"no-cache"))
        await send({"type": "http.response.start", "status": reply.status, "headers": headers})
        # The server drops sends after a disconnect without telling; the pump's generator cleans up when cancelled.
        pump = await until_disconnect(_pump(reply.stream, send), receive)
        if not pump.cancelled():
            pump.result()  # re-raise what broke the stream
    finally:
        if reply.release is not None:
            reply.release()  # also covers a stream that never started (the client left first)


async def until_disconnect(work: Coroutine[Any, Any, None], receive: Receive) -> asyncio.Future[None]:
    """Run `work` until it ends or the client disconnects, whichever comes first, and cancel the other.

    Only `receive` says the client left, so it is watched alongside. The returned task is cancelled if the
    client left first, else done (its `result()` re-raises what broke `work`).
    """
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(disconnected(receive))
    try:
        await asyncio.wait((task, watcher), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for pending in (watcher, task):
            if not pending.done():
                pending.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await pending
    return task


async def _pump(stream: AsyncIterator[bytes], send: Send) -> None:
    try:
        async for chunk in stream:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
    finally:
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()


async def disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
