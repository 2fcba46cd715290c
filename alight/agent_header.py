# pyright: strict
"""Which agent makes a model call: a context value the integrations set, sent to the gateway as X-Alight-Agent.

The gateway routes each call to its policy before the call's span reaches the server, so the agent's name travels
with the HTTP request itself: while a rollout runs, the propagator below joins the global one the httpx
instrumentation already calls for `traceparent`. Code without an integration can name the agent itself:
`with alight.calling_agent("planner"): client.chat...`.
"""

from __future__ import annotations

import contextlib
import string
import threading
from collections.abc import Generator
from urllib.parse import quote

from opentelemetry import context as otel_context
from opentelemetry import propagate
from opentelemetry.context import Context
from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.propagators.textmap import (
    CarrierT,
    Getter,
    Setter,
    TextMapPropagator,
    default_getter,
    default_setter,
)

from alight.semconv import HEADER_AGENT

_KEY = otel_context.create_key("alight.calling_agent")
# Header values are ASCII on the wire; other characters travel percent-encoded (UTF-8), '%' itself too.
_SAFE = "".join(c for c in string.printable if c not in "%\t\n\r\x0b\x0c")
_lock = threading.Lock()


def with_agent(name: str, context: Context | None = None) -> Context:
    """`context` (default: the current one) with `name` as the calling agent."""
    return otel_context.set_value(_KEY, name, context)


@contextlib.contextmanager
def calling_agent(name: str) -> Generator[None]:
    """Model calls made inside the block carry `name` as their agent (X-Alight-Agent) during a rollout."""
    token = otel_context.attach(with_agent(name))
    try:
        yield
    finally:
        otel_context.detach(token)


class AgentHeaderPropagator(TextMapPropagator):
    """Injects X-Alight-Agent from the context; extracts nothing (the gateway reads the header itself)."""

    def inject(
        self, carrier: CarrierT, context: Context | None = None, setter: Setter[CarrierT] = default_setter
    ) -> None:
        name = otel_context.get_value(_KEY, context)  # `context` None: the current one
        if isinstance(name, str) and name:
            setter.set(carrier, HEADER_AGENT, quote(name, safe=_SAFE))

    def extract(
        self, carrier: CarrierT, context: Context | None = None, getter: Getter[CarrierT] = default_getter
    ) -> Context:
        return context if context is not None else otel_context.get_current()

    @property
    def fields(self) -> set[str]:
        return {HEADER_AGENT}


_installed: list[tuple[TextMapPropagator, TextMapPropagator]] = []  # (the one we replaced, ours)


def install() -> None:
    """Add the header to the global propagator (the app's own propagators stay, in front). Idempotent."""
    with _lock:
        if _installed:
            return
        previous = propagate.get_global_textmap()
        ours = CompositePropagator([previous, AgentHeaderPropagator()])
        propagate.set_global_textmap(ours)
        _installed.append((previous, ours))


def uninstall() -> None:
    """Put back the propagator install() replaced, unless someone replaced ours since (theirs then stays)."""
    with _lock:
        if not _installed:
            return
        previous, ours = _installed.pop()
        if propagate.get_global_textmap() is ours:
            propagate.set_global_textmap(previous)
