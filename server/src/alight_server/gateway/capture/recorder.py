"""Recording one call's outcome: durably, with its metrics; what the agent gets when that fails."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from alight.schemas import ModelCall
from alight_server.gateway.capture.record import SPANNED_WEIGHT_UPDATE, CallRecord, Tokens
from alight_server.gateway.capture.writer import CaptureWriter
from alight_server.gateway.errors import GatewayError
from alight_server.gateway.metrics import GatewayMetrics
from alight_server.gateway.reply import CLIENT_GONE, CLIENT_GONE_STATUS, Reply

_GONE = f"{CLIENT_GONE}: the agent disconnected before the answer was complete; the upstream request was cancelled"


@dataclass
class Recorder:
    writer: CaptureWriter
    metrics: GatewayMetrics
    served_version: Callable[[], Awaitable[int]]
    # The gateway's limits, charged an answered call's (rollout id, attempt, upstream, (prompt, completion) tokens).
    spent: Callable[[str, int, str | None, tuple[int, int]], None]

    async def record(self, record: CallRecord, *, status: int, **fields: Any) -> ModelCall:
        """Store the call durably; if that fails the agent gets an error (503), never an unrecorded answer."""
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
            self.spent(record.rollout_id, record.attempt, record.upstream, counts)
        capture_s = time.perf_counter() - began
        self.metrics.recorded(record.flavour.value, status, record.streamed, latency_ms / 1000, capture_s, counts)
        return stored

    async def failed(self, record: CallRecord, exc: GatewayError, anthropic: bool) -> Reply:
        """The call failed upstream: record why, and answer the agent with that error."""
        await self.record(record, status=exc.status, error=exc.message)
        return exc.reply(anthropic)

    async def failed_quietly(self, record: CallRecord, exc: GatewayError) -> None:
        """As `failed`, for a stream already under way: its error event goes out whether or not this stores."""
        with contextlib.suppress(GatewayError):
            await self.record(record, status=exc.status, error=exc.message)

    async def gone(self, record: CallRecord, response: dict[str, Any] | None = None, tokens: Any = None) -> None:
        """The agent left before its answer: the request and whatever arrived, flagged so no trainer uses it."""
        if record.recorded:
            return
        tokens = tokens or Tokens()
        tokens.flags = sorted({*tokens.flags, CLIENT_GONE})
        with contextlib.suppress(GatewayError):
            await self.record(record, status=CLIENT_GONE_STATUS, response=response, tokens=tokens, error=_GONE)
