"""Prometheus metrics for the gateway, on a registry owned by one app (no process globals)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


class GatewayMetrics:
    def __init__(self, in_flight: Callable[[], float], paused_seconds: Callable[[], float]) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        counter = partial(Counter, registry=r)
        histogram = partial(Histogram, buckets=_LATENCY_BUCKETS, registry=r)
        self.calls = counter("alight_gateway_calls", "Model calls through the gateway", ["flavour", "status"])
        self.latency = histogram(
            "alight_gateway_call_latency_seconds", "Time from request to recorded response", ["flavour", "streamed"]
        )
        self.capture = histogram("alight_gateway_capture_seconds", "Time to record a model call durably")
        self.response_start = histogram(
            "alight_gateway_response_start_seconds",
            "Time from a request's arrival (its connection's accept, or its first byte on a kept-alive one)"
            " to the response start: what the client waits, queueing before the handler included",
        )
        self.queued = histogram(
            "alight_gateway_queued_seconds",
            "Time from a request's arrival to the gateway's handler starting (event-loop queueing)",
        )
        self.retries = counter("alight_gateway_upstream_retries", "Upstream attempts retried", ["reason"])
        self.tokens = counter("alight_gateway_tokens_captured", "Token ids recorded", ["kind"])
        self.rejected = counter("alight_gateway_rejected", "Calls refused before reaching an upstream", ["reason"])
        self.limited = counter(
            "alight_gateway_rate_limited",
            "Calls answered 429 over a rate limit (gateway.limits.run or .upstreams), by run and limit",
            ["run", "limit"],
        )
        self.over_budget = counter(
            "alight_gateway_budget_refusals",
            "Calls refused past their attempt's budget (gateway.limits.attempt), by run and limit",
            ["run", "limit"],
        )
        Gauge("alight_gateway_in_flight", "Model calls in flight", registry=r).set_function(in_flight)
        Gauge("alight_gateway_paused_seconds", "Total seconds the gateway spent paused", registry=r).set_function(
            paused_seconds
        )
        self._prompt_tokens = self.tokens.labels(kind="prompt")
        self._response_tokens = self.tokens.labels(kind="response")
        # Labelled children by label values: `labels()` validates and locks on every call (hot path).
        self._children: dict[tuple[str, ...], Any] = {}

    def _child(self, metric: Any, *values: str) -> Any:
        key = (str(id(metric)), *values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*values)
        return child

    def recorded(
        self, flavour: str, status: int, streamed: bool, latency_s: float, capture_s: float, tokens: tuple[int, int]
    ) -> None:
        """One call stored: its latency, the time its capture took, and (prompt, response) token counts."""
        self.capture.observe(capture_s)
        self._child(self.calls, flavour, str(status)).inc()
        self._child(self.latency, flavour, "true" if streamed else "false").observe(latency_s)
        if tokens[0]:
            self._prompt_tokens.inc(tokens[0])
        if tokens[1]:
            self._response_tokens.inc(tokens[1])

    def response_started(self, arrived: float | None, handler_began: float, now: float) -> None:
        """The reply's first byte is about to go; `arrived` is None where the server did not stamp it."""
        if arrived is None:  # not served by StampedHttp: the handler's own start is the best known
            arrived = handler_began
        else:
            self.queued.observe(handler_began - arrived)
        self.response_start.observe(now - arrived)

    def reject(self, status: int) -> None:
        self._child(self.rejected, str(status)).inc()

    def rate_limited(self, run: str, limit: str) -> None:
        """`run` is the rollouts' run_dir ("" for rollouts without one); `limit` e.g. run_requests."""
        self._child(self.limited, run, limit).inc()

    def budget_refused(self, run: str, limit: str) -> None:
        self._child(self.over_budget, run, limit).inc()
