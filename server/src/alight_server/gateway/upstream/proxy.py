"""Upstream calls: bounded retries with jittered backoff, failover in routing order, one deadline."""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import orjson

from alight_server.config import GatewayConfig
from alight_server.gateway.errors import GatewayError
from alight_server.gateway.metrics import GatewayMetrics
from alight_server.gateway.upstream.http import HttpResponse, UpstreamConnectionError, UpstreamHttp
from alight_server.gateway.upstream.pool import Target, UpstreamPool, upstream_headers

RETRYABLE_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
BACKOFF_BASE_S = 0.05
BACKOFF_CAP_S = 2.0


def backoff_s(
    retry: int, retry_after: str | None = None, *, base_s: float = BACKOFF_BASE_S, cap_s: float = BACKOFF_CAP_S
) -> float:
    """Full jitter on an exponential ramp from `base_s`; an upstream's own Retry-After wins when it is shorter than
    the cap (the gateway's defaults keep an agent's call waiting 2 s at most)."""
    if retry_after:
        with contextlib.suppress(ValueError):  # an HTTP date: the ramp instead
            return min(max(0.0, float(retry_after)), cap_s)
    return random.uniform(0, min(cap_s, base_s * 2**retry))


@dataclass
class UpstreamReply:
    """An upstream answer: fully read (`body`), or a 200 stream still open (`raw`)."""

    status: int
    body: bytes
    raw: HttpResponse | None = None

    def text(self, limit: int = 300) -> str:
        return self.body[:limit].decode(errors="replace")

    def chunks(self, deadline: float) -> AsyncIterator[bytes]:
        assert self.raw is not None
        return self.raw.chunks(deadline)

    def close(self) -> None:
        if self.raw is not None:
            self.raw.close()


class Proxy:
    def __init__(self, http: UpstreamHttp, pool: UpstreamPool, config: GatewayConfig, metrics: GatewayMetrics):
        self.http = http
        self.pool = pool
        self.config = config
        self.metrics = metrics

    async def send(
        self,
        targets: list[Target],
        path: str,
        payload: Callable[[Target], Awaitable[dict[str, Any]]],
        deadline: float,
        *,
        stream: bool,
    ) -> tuple[Target, UpstreamReply]:
        """POST to the first target that answers with a non-retryable status.

        Non-streamed answers come back fully read. A streamed 200 comes back open (the caller reads and closes it); once
        its first byte has been forwarded it is never retried. Raises GatewayError 502/504 when every try failed or the
        deadline passed.
        """
        last = "no attempt made"
        for retry in range(self.config.max_retries + 1):
            target = targets[retry % len(targets)]
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                async with asyncio.timeout(remaining):
                    body = orjson.dumps(await payload(target))  # may ask the upstream for its model name
                    resp = await self.http.request("POST", target.base_url + path, upstream_headers(target), body)
                    if stream and resp.status == 200:
                        reply = UpstreamReply(200, b"", raw=resp)
                    else:
                        reply = UpstreamReply(resp.status, await resp.read())
            except TimeoutError:
                raise self.timeout_error(target.id) from None
            except UpstreamConnectionError as exc:
                last = f"upstream {target.id} at {target.base_url} is unreachable ({exc})"
                self.pool.invalidate()
                self.metrics.retries.labels(reason="transport").inc()
                await self._sleep(backoff_s(retry), deadline)
                continue
            if reply.status in RETRYABLE_STATUS and retry < self.config.max_retries:
                last = f"upstream {target.id} answered {reply.status}"
                self.metrics.retries.labels(reason=str(reply.status)).inc()
                await self._sleep(backoff_s(retry, resp.headers.get("retry-after")), deadline)
                continue
            return target, reply
        if time.monotonic() >= deadline:
            raise self.timeout_error(targets[0].id)
        raise GatewayError(502, f"{last}; gave up after {self.config.max_retries + 1} tries")

    def timeout_error(self, upstream_id: str | None) -> GatewayError:
        return GatewayError(
            504,
            f"upstream {upstream_id} did not answer within {self.config.upstream_timeout_s}s "
            "(gateway.upstream_timeout_s)",
        )

    @staticmethod
    async def _sleep(delay: float, deadline: float) -> None:
        await asyncio.sleep(max(0.0, min(delay, deadline - time.monotonic())))
