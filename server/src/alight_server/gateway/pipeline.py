"""One model call through the gateway: admit, force, forward, capture durably, then answer."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio.to_thread
import orjson

from alight.schemas import Mode, ModelCall
from alight_server.config import GatewayConfig
from alight_server.gateway.attempts import AttemptResolver, CallerAttempt
from alight_server.gateway.capture import SPANNED_WEIGHT_UPDATE, CallRecord, Tokens, parse_traceparent, tokens_of
from alight_server.gateway.client_gone import CLIENT_GONE, CLIENT_GONE_STATUS
from alight_server.gateway.errors import GatewayError
from alight_server.gateway.flavour import Flavour, StreamTranslator
from alight_server.gateway.metrics import GatewayMetrics
from alight_server.gateway.pause import PauseGate
from alight_server.gateway.proxy import Proxy, UpstreamReply
from alight_server.gateway.replicas import Replicas
from alight_server.gateway.reply import EVENT_STREAM, Reply
from alight_server.gateway.request_checks import check_upstream_body
from alight_server.gateway.upstream_http import UpstreamConnectionError, UpstreamHttp
from alight_server.gateway.upstreams import Target, UpstreamPool
from alight_server.gateway.writer import CaptureWriter
from alight_server.nesting import TooDeep, check_depth, may_be_deep
from alight_server.store.base import Store


def _upstream_message(reply: UpstreamReply) -> str:
    try:
        err = orjson.loads(reply.body).get("error")
        return str(err.get("message") if isinstance(err, dict) else err)
    except (orjson.JSONDecodeError, AttributeError):
        return reply.text()


async def _sse_data(reply: UpstreamReply, deadline: float) -> AsyncIterator[list[bytes]]:
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


def _translate(flavour: Flavour, body: dict[str, Any]) -> dict[str, Any]:
    """The flavour's upstream request; a body of the wrong shape anywhere is the caller's 400, never a 500."""
    try:
        return flavour.to_upstream(body)
    except GatewayError:
        raise
    except (TypeError, AttributeError, KeyError, ValueError) as exc:
        raise GatewayError(400, f"malformed {flavour.kind.value} request: {exc}") from exc


MAX_TOKENS_CAP = "alight_max_tokens_cap"  # in a recorded request: the gateway lowered its output budget


def capped(upstream: dict[str, Any], body: dict[str, Any], cap: int, path: str) -> dict[str, Any]:
    """Apply the output-token cap to `upstream`; the request to record, noting the cap when it lowered one."""
    keys = [k for k in ("max_tokens", "max_completion_tokens") if upstream.get(k) is not None]
    if not keys and path == "/completions":
        return body  # the completions default (16) is already a bound
    asked = min((upstream[k] for k in keys if isinstance(upstream[k], int)), default=None)
    if asked is not None and asked <= cap:
        return body
    for key in keys or ["max_tokens"]:
        upstream[key] = cap
    return {**body, MAX_TOKENS_CAP: {"cap": cap, "asked": asked}}


def _partial(flavour: Flavour, translator: StreamTranslator, assembler: Any) -> tuple[dict[str, Any] | None, Any]:
    """What a cut stream delivered so far, as the agent's response and its tokens; (None, None) if unreadable."""
    try:
        assembled = assembler.result()
        tokens = tokens_of(assembled, chat=flavour.upstream_path != "/completions")
        return translator.agent_response(assembled), tokens
    except Exception:  # a stream cut anywhere: keep the request, lose the partial answer
        return None, None


def _once(fn: Callable[[], None]) -> Callable[[], None]:
    done = False

    def call() -> None:
        nonlocal done
        if not done:
            done = True
            fn()

    return call


class Gateway:
    """The capture proxy: everything a call needs, shared by all routes of one app."""

    def __init__(
        self, store: Store, config: GatewayConfig, token_secret: Callable[[], bytes], max_body_bytes: int
    ) -> None:
        self.store = store
        self.config = config
        self.max_body_bytes = max_body_bytes
        self.gate = PauseGate()
        self.replicas = Replicas(store, self.gate, self._reopen, config.replica_sync_s)
        self.metrics = GatewayMetrics(lambda: self.gate.in_flight, self.gate.paused_seconds)
        self.http = UpstreamHttp()
        self.upstreams = UpstreamPool(store, self.http.get_json)
        self.proxy = Proxy(self.http, self.upstreams, config, self.metrics)
        self.attempts = AttemptResolver(store, token_secret)
        self.writer = CaptureWriter(store)
        self._version: int | None = None
        self._version_at = float("-inf")

    async def aclose(self) -> None:
        await self.replicas.stop()
        await self.http.aclose()
        await anyio.to_thread.run_sync(self.writer.close)

    async def served_version(self) -> int:
        """The policy version calls are attributed to, re-read like the upstream list."""
        if self._version is None or time.monotonic() - self._version_at > 1.0:
            self._version = await anyio.to_thread.run_sync(self.store.current_policy_version)
            self._version_at = time.monotonic()
        return self._version

    async def models_listing(self) -> bytes:
        """`GET /models`: the models behind the served policy version."""
        targets = await self.upstreams.route("models", await self.served_version())
        names = dict.fromkeys([await self.upstreams.model_name(t) or t.id for t in targets])
        data = [{"id": n, "object": "model", "created": 0, "owned_by": "alight"} for n in names]
        return orjson.dumps({"object": "list", "data": data})

    def set_served_version(self, version: int) -> None:
        self._version, self._version_at = version, time.monotonic()

    async def _reopen(self) -> None:
        """Another replica resumed: calls from here on count as the version it set, on its upstreams."""
        self.set_served_version(await anyio.to_thread.run_sync(self.store.current_policy_version))
        self.upstreams.invalidate()

    @staticmethod
    def _parse(raw: bytes) -> dict[str, Any]:
        """The agent's JSON object (`read_body` already enforced the size limit while reading)."""
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            if "depth limit" in str(exc):  # orjson's own limit (1024)
                raise GatewayError(400, str(TooDeep("request body"))) from None
            raise GatewayError(400, f"request body is not valid JSON: {exc}") from None
        if not isinstance(body, dict):
            raise GatewayError(400, f"request body must be a JSON object, got {type(body).__name__}")
        if may_be_deep(raw):  # two bytes.count calls; only bodies with many brackets are walked
            try:
                check_depth(body, "request body")
            except TooDeep as exc:
                raise GatewayError(400, str(exc)) from None
        return body

    def _force(self, upstream: dict[str, Any], caller: CallerAttempt, flavour: Flavour) -> dict[str, Any]:
        """What training needs, whatever the agent asked: temperature by mode, logprobs, token ids."""
        cfg = self.config
        upstream["temperature"] = cfg.train_temperature if caller.mode == Mode.TRAIN else cfg.val_temperature
        if cfg.force_logprobs:
            if flavour.upstream_path == "/completions":
                upstream["logprobs"] = max(int(upstream.get("logprobs") or 0), 0)
            else:
                upstream["logprobs"] = True
        upstream["return_token_ids"] = True
        return upstream

    async def handle(
        self,
        flavour: Flavour,
        read_body: Callable[[], Awaitable[bytes]],
        token: str | None,
        traceparent: str | None = None,
        path_rollout: str | None = None,
        path_attempt: int | None = None,
    ) -> Reply:
        """One agent call, from its token and body to the reply it gets (errors included)."""
        anthropic = flavour.anthropic_errors
        try:
            caller = await self.attempts.resolve(token, path_rollout, path_attempt)
            if not self.gate.enter():
                wait = self.config.retry_after_s
                raise GatewayError(
                    429,
                    "the gateway is paused for a policy update; retry after the Retry-After delay",
                    headers={"retry-after": f"{wait:g}", "retry-after-ms": str(int(wait * 1000))},
                )
        except GatewayError as exc:
            self.metrics.reject(exc.status)
            return exc.reply(anthropic)
        streaming = False
        try:
            body = self._parse(await read_body())
            translated = _translate(flavour, body)
            check_upstream_body(translated)
            upstream_body = self._force(translated, caller, flavour)
            trace_id, span_id = parse_traceparent(traceparent)
            cap = self.config.max_output_tokens
            record = CallRecord(
                rollout_id=caller.rollout_id,
                attempt=caller.attempt,
                flavour=flavour.kind,
                request=body if cap is None else capped(upstream_body, body, cap, flavour.upstream_path),
                trace_id=trace_id,
                span_id=span_id,
                streamed=bool(upstream_body.get("stream")),
                policy_version=await self.served_version(),
                started=time.perf_counter(),
            )
            try:
                reply = await self._forward(flavour, caller, body, upstream_body, record)
            except asyncio.CancelledError:  # the agent disconnected (client_gone.py): keep what is known
                if not record.recorded:
                    await self._record_gone(record)
                raise
            streaming = reply.stream is not None
            return reply
        except GatewayError as exc:
            self.metrics.reject(exc.status)
            return exc.reply(anthropic)
        finally:
            if not streaming:
                self.gate.leave()

    async def _forward(
        self,
        flavour: Flavour,
        caller: CallerAttempt,
        body: dict[str, Any],
        upstream_body: dict[str, Any],
        record: CallRecord,
    ) -> Reply:
        deadline = time.monotonic() + self.config.upstream_timeout_s
        agent_model = upstream_body.get("model")

        async def payload(target: Target) -> dict[str, Any]:
            return {**upstream_body, "model": await self.upstreams.model_name(target) or agent_model}

        try:
            targets = await self.upstreams.route(f"{caller.rollout_id}/{caller.attempt}", record.policy_version)
            target, resp = await self.proxy.send(
                targets, flavour.upstream_path, payload, deadline, stream=record.streamed
            )
        except GatewayError as exc:
            return await self._failed(record, flavour, exc)
        record.upstream = target.id
        if resp.status != 200:
            status = resp.status if 400 <= resp.status < 500 else 502
            exc = GatewayError(status, f"upstream {target.id} answered {resp.status}: {_upstream_message(resp)}")
            return await self._failed(record, flavour, exc)
        if record.streamed:
            translator = flavour.stream(body)
            gate = self.gate

            def finish() -> None:  # however the stream ends, even if it never started
                resp.close()
                gate.leave()

            release = _once(finish)
            relay = self._relay(flavour, translator, record, resp, deadline, release)
            return Reply(200, content_type=EVENT_STREAM, stream=relay, release=release)
        try:
            upstream = orjson.loads(resp.body)
            if not isinstance(upstream, dict) or not isinstance(upstream.get("choices"), list):
                raise ValueError("no `choices` list")
        except (orjson.JSONDecodeError, ValueError) as exc:
            detail = f"upstream {target.id} returned a body that is not an OpenAI response ({exc}): {resp.text(200)!r}"
            return await self._failed(record, flavour, GatewayError(502, detail))
        try:
            tokens = tokens_of(upstream, chat=flavour.upstream_path != "/completions")
            agent_body = flavour.from_upstream(upstream, body)
        except (TypeError, AttributeError, KeyError, ValueError) as exc:
            detail = f"upstream {target.id} returned a malformed {flavour.upstream_path} response ({exc!r})"
            return await self._failed(record, flavour, GatewayError(502, detail))
        await self._record(record, status=200, response=agent_body, tokens=tokens)
        return Reply(200, orjson.dumps(agent_body))

    async def _record_gone(
        self, record: CallRecord, response: dict[str, Any] | None = None, tokens: Any = None
    ) -> None:
        """The agent left before its answer: the request and whatever arrived, flagged so no trainer uses it."""
        tokens = tokens or Tokens()
        tokens.flags = sorted({*tokens.flags, CLIENT_GONE})
        error = (
            f"{CLIENT_GONE}: the agent disconnected before the answer was complete; the upstream request was cancelled"
        )
        with contextlib.suppress(GatewayError):
            await self._record(record, status=CLIENT_GONE_STATUS, response=response, tokens=tokens, error=error)

    async def _failed(self, record: CallRecord, flavour: Flavour, exc: GatewayError) -> Reply:
        await self._record(record, status=exc.status, error=exc.message)
        return exc.reply(flavour.anthropic_errors)

    async def _record(self, record: CallRecord, *, status: int, **fields: Any) -> ModelCall:
        """Store the call durably; if that fails the agent gets an error, never an unrecorded answer."""
        latency_ms = (time.perf_counter() - record.started) * 1000
        call = record.to_model_call(status=status, latency_ms=latency_ms, **fields)
        if record.policy_version != await self.served_version():  # admitted before an update that did not wait
            call.flags = sorted({*call.flags, SPANNED_WEIGHT_UPDATE})
        began = time.perf_counter()
        record.recorded = True  # from here the row is on its way, even if this task is cancelled
        try:
            stored = await self.writer.write(call)
        except Exception as exc:
            raise GatewayError(
                503, f"the gateway could not record this model call ({type(exc).__name__}: {exc})"
            ) from exc
        counts = (0, 0)
        if status == 200:
            completion = len(call.response_token_ids) + sum(len(c.get("token_ids", [])) for c in call.extra_choices)
            counts = (len(call.prompt_token_ids), completion)
        capture_s = time.perf_counter() - began
        self.metrics.recorded(record.flavour.value, status, record.streamed, latency_ms / 1000, capture_s, counts)
        return stored

    async def _relay(
        self,
        flavour: Flavour,
        translator: StreamTranslator,
        record: CallRecord,
        resp: UpstreamReply,
        deadline: float,
        release: Callable[[], None],
    ) -> AsyncIterator[bytes]:
        """Forward the stream; hold its closing events until the call is recorded."""
        anthropic = flavour.anthropic_errors
        assembler = flavour.assembler()
        held: list[bytes] = []
        error: GatewayError | None = None
        try:
            if opening := translator.start():
                yield b"".join(opening)
            done = False
            try:
                async for batch in _sse_data(resp, deadline):
                    # What one upstream read carried goes to the agent in one write.
                    out: list[bytes] = []
                    failure: Exception | None = None
                    try:
                        for data in batch:
                            if data == b"[DONE]":
                                done = True
                                break
                            chunk = orjson.loads(data)
                            if not isinstance(chunk, dict) or ("error" in chunk and not chunk.get("choices")):
                                shown = data[:300].decode(errors="replace")
                                raise GatewayError(502, f"upstream {record.upstream} failed mid-stream: {shown}")
                            assembler.add(chunk)
                            now, later = translator.on_chunk(chunk)
                            out.extend(now)
                            held.extend(later)
                    except Exception as exc:  # sorted out below, after what came before it is sent
                        failure = exc
                    if out:
                        yield b"".join(out)
                    if failure is not None:
                        raise failure
                    if done:
                        break
                if not done:
                    error = GatewayError(502, f"upstream {record.upstream} ended the stream before [DONE]")
            except TimeoutError:
                error = self.proxy.timeout_error(record.upstream)
            except GatewayError as exc:
                error = exc
            except (ValueError, TypeError, AttributeError, KeyError, UpstreamConnectionError) as exc:
                error = GatewayError(502, f"upstream {record.upstream} broke the stream ({type(exc).__name__}: {exc})")
            except (GeneratorExit, asyncio.CancelledError):  # the agent left mid-stream
                resp.close()
                await self._record_gone(record, *_partial(flavour, translator, assembler))
                raise
            finally:
                resp.close()
            if error is None:
                assembled = assembler.result()
                tokens = tokens_of(assembled, chat=flavour.upstream_path != "/completions")
                closing = translator.finish(assembled)
                try:
                    await self._record(record, status=200, response=translator.agent_response(assembled), tokens=tokens)
                except GatewayError as exc:
                    yield exc.sse(anthropic)
                    return
                if tail := held + closing:
                    yield b"".join(tail)
            else:
                # The agent gets the upstream's error either way; nothing it saw goes unrecorded.
                with contextlib.suppress(GatewayError):
                    await self._record(record, status=error.status, error=error.message)
                yield error.sse(anthropic)
        finally:
            release()
