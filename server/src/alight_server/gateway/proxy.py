"""Upstream calls: bounded retries with jittered backoff, failover in routing order, one deadline."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import orjson

from alight_server.config import GatewayConfig
from alight_server.gateway.errors import GatewayError
from alight_server.gateway.metrics import GatewayMetrics
from alight_server.gateway.upstreams import Target, UpstreamPool, upstream_headers

RETRYABLE_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
BACKOFF_BASE_S = 0.05
BACKOFF_CAP_S = 2.0


def backoff_s(retry: int, retry_after: str | None = None) -> float:
    """Full jitter on an exponential ramp; an upstream's own Retry-After wins when it is shorter than the cap."""
    if retry_after:
        try:
            return min(float(retry_after), BACKOFF_CAP_S)
        except ValueError:
            pass
    return random.uniform(0, min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2**retry))


class Proxy:
    def __init__(self, http: httpx.AsyncClient, pool: UpstreamPool, config: GatewayConfig, metrics: GatewayMetrics):
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
    ) -> tuple[Target, httpx.Response]:
        """POST to the first target that answers with a non-retryable status.

        Non-streamed responses come back fully read. A streamed 200 comes back
        open (the caller reads and closes it); once its first byte has been
        forwarded it is never retried. Raises GatewayError 502/504 when every
        try failed or the deadline passed.
        """
        last: str = "no attempt made"
        for retry in range(self.config.max_retries + 1):
            target = targets[retry % len(targets)]
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            body = orjson.dumps(await payload(target))
            request = self.http.build_request(
                "POST",
                target.base_url + path,
                content=body,
                headers=upstream_headers(target),
                timeout=httpx.Timeout(remaining),
            )
            try:
                async with asyncio.timeout(remaining):
                    resp = await self.http.send(request, stream=stream)
                    if not stream or resp.status_code != 200:
                        await resp.aread()
            except TimeoutError:
                raise self.timeout_error(target.id) from None
            except httpx.TimeoutException:
                raise self.timeout_error(target.id) from None
            except httpx.TransportError as exc:
                last = f"upstream {target.id} at {target.base_url} is unreachable ({type(exc).__name__}: {exc})"
                self.pool.invalidate()
                self.metrics.retries.labels(reason="transport").inc()
                await self._sleep(backoff_s(retry), deadline)
                continue
            if resp.status_code in RETRYABLE_STATUS and retry < self.config.max_retries:
                last = f"upstream {target.id} answered {resp.status_code}"
                self.metrics.retries.labels(reason=str(resp.status_code)).inc()
                retry_after = resp.headers.get("retry-after")
                await resp.aclose()
                await self._sleep(backoff_s(retry, retry_after), deadline)
                continue
            return target, resp
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
