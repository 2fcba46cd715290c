"""Fixtures for integration tests: an in-memory span exporter and the vLLM-shaped fake upstream on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.instrumentation.httpx import HTTPX2ClientInstrumentor, HTTPXClientInstrumentor
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from alight_server.serving import ServerThread
from alight_server.testing.fake_upstream import create_fake_upstream

_EXPORTER = InMemorySpanExporter()


def _install_provider() -> None:
    # The global provider can be set once per process; every in-process test shares this one.
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        trace.set_tracer_provider(provider)
    # traceparent on model calls: the openai client uses httpx2, others httpx (no-ops when already on).
    HTTPXClientInstrumentor().instrument()
    HTTPX2ClientInstrumentor().instrument()


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Spans finished during the test, in end order."""
    _install_provider()
    _EXPORTER.clear()
    yield _EXPORTER
    _EXPORTER.clear()


@pytest.fixture(scope="session")
def fake_upstream() -> Iterator[tuple[str, Any]]:
    """(base URL ending in /v1, the upstream's state with its call log) for the model named 'fake'."""
    app = create_fake_upstream("fake")
    with ServerThread(app) as url:
        yield f"{url}/v1", app.state.fake


class SpanTree:
    """Finished spans with the lookups tests need: by name prefix, parent, ancestors."""

    def __init__(self, finished: tuple[ReadableSpan, ...] | list[ReadableSpan]) -> None:
        self.spans = list(finished)

    def named(self, prefix: str) -> list[ReadableSpan]:
        return [s for s in self.spans if s.name.startswith(prefix)]

    def by_id(self, span_id: int) -> ReadableSpan | None:
        return next((s for s in self.spans if s.context.span_id == span_id), None)

    def parent(self, span: ReadableSpan) -> ReadableSpan | None:
        return self.by_id(span.parent.span_id) if span.parent else None

    def ancestors(self, span: ReadableSpan) -> list[str]:
        """Names of the span's ancestors, nearest first."""
        names, current = [], self.parent(span)
        while current is not None:
            names.append(current.name)
            current = self.parent(current)
        return names


@pytest.fixture
def tree(spans: InMemorySpanExporter) -> Any:
    """Call it after the run: `tree()` is a SpanTree of what finished so far."""
    return lambda: SpanTree(spans.get_finished_spans())


def caller_span_ids(upstream_state: Any) -> list[int]:
    """The span id in each logged call's traceparent header (the span that made the HTTP request)."""
    ids = []
    for call in upstream_state.calls:
        header = call.headers.get("traceparent", "")
        ids.append(int(header.split("-")[2], 16) if header.count("-") == 3 else 0)
    return ids


@pytest.fixture
def callers() -> Any:
    return caller_span_ids
