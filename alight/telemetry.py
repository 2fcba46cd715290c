# pyright: strict
"""OpenTelemetry for a rollout: export spans to the server over OTLP/HTTP, propagate traceparent on model calls.

alight never replaces an application's tracing: it adds one span processor to the process's SDK TracerProvider
(else installs its own), and stamps the rollout's resource attributes on each span it exports, so spans of a
provider the app configured still land in the right rollout.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from alight import agent_header, envvars
from alight.context import AttemptContext

EXPORT_TIMEOUT_S = 10.0
FLUSH_TIMEOUT_MS = 15_000
_lock = threading.Lock()


class _StampingExporter(SpanExporter):
    """Merges the rollout's resource attributes into every span before handing it on."""

    def __init__(self, inner: SpanExporter, resource: Resource) -> None:
        self.inner = inner
        self.resource = resource

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return self.inner.export([self._stamp(s) for s in spans])

    def _stamp(self, span: ReadableSpan) -> ReadableSpan:
        if all(span.resource.attributes.get(k) == v for k, v in self.resource.attributes.items()):
            return span
        return ReadableSpan(
            name=span.name,
            context=span.context,
            parent=span.parent,
            resource=span.resource.merge(self.resource),
            attributes=span.attributes,
            events=span.events,
            links=span.links,
            kind=span.kind,
            status=span.status,
            start_time=span.start_time,
            end_time=span.end_time,
            instrumentation_scope=span.instrumentation_scope,
        )

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self.inner.force_flush(timeout_millis)


class _RolloutRouter(SpanProcessor):
    """Added once per provider: sends each ended span to the exporter of the rollout whose trace it is in.

    Spans of traces alight did not start are left to the application's own processors: guessing would ship
    unrelated work (or, with a server in the same process, the server's own request spans, in a loop) to the rollout.
    """

    def __init__(self) -> None:
        self.by_trace: dict[int, SpanProcessor] = {}

    def on_end(self, span: ReadableSpan) -> None:
        ctx = span.context
        target = self.by_trace.get(ctx.trace_id) if ctx is not None else None
        if target is not None:
            target.on_end(span)

    def shutdown(self) -> None:
        for processor in set(self.by_trace.values()):
            processor.shutdown()
        self.by_trace.clear()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return all(p.force_flush(timeout_millis) for p in set(self.by_trace.values()))


def _provider(resource: dict[str, str]) -> TracerProvider:
    """The application's SDK provider if it has one, else ours, installed globally."""
    existing = trace.get_tracer_provider()
    if isinstance(existing, TracerProvider):
        return existing
    ours = TracerProvider(resource=Resource.create(resource))
    trace.set_tracer_provider(ours)
    # set_tracer_provider is once-only; if someone else won the race, use theirs when it is an SDK one.
    winner = trace.get_tracer_provider()
    return winner if isinstance(winner, TracerProvider) else ours


def _router(provider: TracerProvider) -> _RolloutRouter:
    router = getattr(provider, "_alight_router", None)
    if not isinstance(router, _RolloutRouter):
        router = _RolloutRouter()
        provider.add_span_processor(router)
        provider._alight_router = router  # type: ignore[attr-defined]  # one router per provider, ever
    return router


@dataclass
class RolloutTelemetry:
    """The tracing of one running rollout; `bind` its root span, `finish` to flush."""

    tracer: trace.Tracer
    router: _RolloutRouter
    processor: SpanProcessor | None

    def bind(self, root: trace.Span) -> None:
        if self.processor is not None:
            with _lock:
                self.router.by_trace[root.get_span_context().trace_id] = self.processor

    def finish(self) -> bool:
        """Flush this rollout's spans to the server; False if they did not all get out in time."""
        ok = True
        if self.processor is not None:
            ok = self.processor.force_flush(FLUSH_TIMEOUT_MS)
            with _lock:
                for trace_id in [t for t, p in self.router.by_trace.items() if p is self.processor]:
                    del self.router.by_trace[trace_id]
            self.processor.shutdown()
        release_http()
        return ok


def preload() -> None:
    """Import what `start` imports when a rollout begins: a preloaded zygote forks attempts with them loaded."""
    import importlib

    for name in ("opentelemetry.exporter.otlp.proto.http.trace_exporter", "opentelemetry.instrumentation.httpx"):
        importlib.import_module(name)


def start(ctx: AttemptContext) -> RolloutTelemetry:
    """Set up export for `ctx`'s rollout; spans go nowhere when the context has no OTLP endpoint."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    resource = envvars.resource_attributes(ctx.rollout_id, ctx.attempt, ctx.mode)
    with _lock:
        provider = _provider(resource)
        router = _router(provider)
    processor: SpanProcessor | None = None
    if ctx.otlp_traces_endpoint:
        headers = {"authorization": f"Bearer {ctx.token}"} if ctx.token else {}
        exporter = OTLPSpanExporter(endpoint=ctx.otlp_traces_endpoint, headers=headers, timeout=EXPORT_TIMEOUT_S)
        processor = BatchSpanProcessor(_StampingExporter(exporter, Resource(resource)))
    tracer = provider.get_tracer("alight")
    hold_http()
    return RolloutTelemetry(tracer=tracer, router=router, processor=processor)


# W3C traceparent on outgoing HTTP: the gateway records the calling span of every model call; and X-Alight-Agent
# when an integration named the calling agent (agent_header.py), for routing. OpenAI and Anthropic use httpx2.
_http_holders = 0
_http_ours: list[object] = []  # instrumentors alight switched on (not ones the app already had on)


def _http_instrumentors() -> list[object]:
    from opentelemetry.instrumentation import httpx as otel_httpx

    found: list[object] = [otel_httpx.HTTPXClientInstrumentor()]
    httpx2_instrumentor = getattr(otel_httpx, "HTTPX2ClientInstrumentor", None)
    if httpx2_instrumentor is not None and getattr(otel_httpx, "_httpx2_module", None) is not None:
        found.append(httpx2_instrumentor())
    return found


def hold_http() -> None:
    """Instrument httpx/httpx2 while at least one rollout runs (reference counted, idempotent)."""
    global _http_holders
    with _lock:
        _http_holders += 1
        if _http_holders == 1:
            agent_header.install()
            for instrumentor in _http_instrumentors():
                if not getattr(instrumentor, "is_instrumented_by_opentelemetry", False):
                    instrumentor.instrument()  # type: ignore[attr-defined]
                    _http_ours.append(instrumentor)


def release_http() -> None:
    """Undo hold_http(); the last release switches off what alight switched on, nothing else."""
    global _http_holders
    with _lock:
        _http_holders = max(0, _http_holders - 1)
        if _http_holders == 0:
            while _http_ours:
                _http_ours.pop().uninstrument()  # type: ignore[attr-defined]
            agent_header.uninstall()
