"""A streamed call: forward the upstream's events as they come, hold the closing ones until the call is recorded."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import orjson

from alight_server.gateway.capture.record import CallRecord, tokens_of
from alight_server.gateway.container import Gateway
from alight_server.gateway.errors import GatewayError
from alight_server.gateway.flavours.base import Flavour, StreamTranslator
from alight_server.gateway.upstream.http import UpstreamConnectionError
from alight_server.gateway.upstream.proxy import UpstreamReply

# What a broken upstream stream raises while it is read or parsed (anything else is the gateway's own bug).
_BROKEN = (ValueError, TypeError, AttributeError, KeyError, UpstreamConnectionError)


async def sse_data(reply: UpstreamReply, deadline: float) -> AsyncIterator[list[bytes]]:
    """The `data:` payloads of an upstream event stream, a list per arrival, bounded by the call's deadline."""
    buffer = b""
    async for piece in reply.chunks(deadline):
        buffer += piece
        *lines, buffer = buffer.split(b"\n")
        data = [line[5:].strip() for line in lines if line.startswith(b"data:")]
        if data:
            yield data
    if buffer.startswith(b"data:"):
        yield [buffer[5:].strip()]


class StreamRelay:
    """One stream's relay; `events()` is the agent's body, `release` runs once however it ends."""

    def __init__(
        self,
        flavour: Flavour,
        translator: StreamTranslator,
        record: CallRecord,
        resp: UpstreamReply,
        gateway: Gateway,
        deadline: float,
    ) -> None:
        self.flavour, self.translator, self.record, self.resp = flavour, translator, record, resp
        self.gw, self.deadline = gateway, deadline
        self.assembler = flavour.assembler()
        self.held: list[bytes] = []  # closing events: sent only once the call is recorded
        self._released = False

    def release(self) -> None:
        """Close the upstream answer and free the pause gate's slot (once; also if the stream never started)."""
        if not self._released:
            self._released = True
            self.resp.close()
            self.gw.gate.leave(self.record.policy)  # routed: it entered its policy too

    async def events(self) -> AsyncIterator[bytes]:
        try:
            if opening := self.translator.start():
                yield b"".join(opening)
            error: GatewayError | None = None
            try:
                async for out in self._forwarded():
                    yield out
            except (GeneratorExit, asyncio.CancelledError):  # the agent left mid-stream
                self.resp.close()
                await self.gw.recorder.gone(self.record, *self._partial())
                raise
            except (TimeoutError, GatewayError, *_BROKEN) as exc:
                error = self._as_error(exc)
            finally:
                self.resp.close()
            if tail := await (self._finish() if error is None else self._fail(error)):
                yield tail
        finally:
            self.release()

    async def _forwarded(self) -> AsyncIterator[bytes]:
        """What each upstream read carried, translated, in one write; raises how the stream went wrong."""
        async for batch in sse_data(self.resp, self.deadline):
            out: list[bytes] = []
            try:
                done = self._on_batch(batch, out)
            except Exception:  # what came before it in the batch goes out first
                if out:
                    yield b"".join(out)
                raise
            if out:
                yield b"".join(out)
            if done:
                return
        raise GatewayError(502, f"upstream {self.record.upstream} ended the stream before [DONE]")

    def _on_batch(self, batch: list[bytes], out: list[bytes]) -> bool:
        """Translate one read's events into `out`; True once the upstream sent [DONE]."""
        for data in batch:
            if data == b"[DONE]":
                return True
            chunk = orjson.loads(data)
            if not isinstance(chunk, dict) or ("error" in chunk and not chunk.get("choices")):
                shown = data[:300].decode(errors="replace")
                raise GatewayError(502, f"upstream {self.record.upstream} failed mid-stream: {shown}")
            self.assembler.add(chunk)
            now, later = self.translator.on_chunk(chunk)
            out.extend(now)
            self.held.extend(later)
        return False

    def _as_error(self, exc: BaseException) -> GatewayError:
        """The agent's error for how the stream broke."""
        if isinstance(exc, TimeoutError):
            return self.gw.proxy.timeout_error(self.record.upstream)
        if isinstance(exc, GatewayError):
            return exc
        return GatewayError(502, f"upstream {self.record.upstream} broke the stream ({type(exc).__name__}: {exc})")

    async def _finish(self) -> bytes:
        """The stream ended well: record it, then release the closing events (or the error recording hit)."""
        assembled = self.assembler.result()
        tokens = tokens_of(assembled, chat=self.flavour.upstream_path != "/completions")
        closing = self.translator.finish(assembled)
        response = self.translator.agent_response(assembled)
        try:
            await self.gw.recorder.record(self.record, status=200, response=response, tokens=tokens)
        except GatewayError as exc:
            return exc.sse(self.flavour.anthropic_errors)
        return b"".join(self.held + closing)

    async def _fail(self, error: GatewayError) -> bytes:
        """The agent gets the upstream's error either way; nothing it saw goes unrecorded."""
        await self.gw.recorder.failed_quietly(self.record, error)
        return error.sse(self.flavour.anthropic_errors)

    def _partial(self) -> tuple[dict[str, Any] | None, Any]:
        """What a cut stream delivered so far, as the agent's response and its tokens; (None, None) if unreadable."""
        try:
            assembled = self.assembler.result()
            tokens = tokens_of(assembled, chat=self.flavour.upstream_path != "/completions")
            return self.translator.agent_response(assembled), tokens
        except Exception:  # a stream cut anywhere: keep the request, lose the partial answer
            return None, None
