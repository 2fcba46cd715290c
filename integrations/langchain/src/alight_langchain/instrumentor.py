"""instrument() / uninstrument() for LangChain: adds the alight handler to every run through a configure hook."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, cast

from langchain_core.language_models import BaseChatModel, BaseLLM
from langchain_core.tracers.context import register_configure_hook
from opentelemetry import context as otel_context

from alight_langchain.handler import AlightCallbackHandler

# The langchain-core versions this integration is tested against (lowest and highest ends); pyproject says the same.
SUPPORTED_VERSIONS = ">=1.0,<2"


@dataclass
class _Switch:
    """Stands in for the ContextVar LangChain's configure hooks read: on, it hands out the handler process-wide.

    A real ContextVar would only reach tasks and threads started after instrument() in the same context;
    the hook only ever calls `.get()`, and this answers the same everywhere.
    """

    handler: AlightCallbackHandler | None = None
    registered: bool = False

    def get(self) -> AlightCallbackHandler | None:
        return self.handler


_switch = _Switch()


def instrument() -> None:
    """Trace every LangChain / LangGraph run in this process. A second call is a no-op; safe outside a rollout."""
    if _switch.handler is not None:
        return
    if not _switch.registered:
        # LangChain keeps configure hooks for the life of the process; registering once and switching is reversible.
        register_configure_hook(cast("ContextVar[Any]", _switch), inheritable=True)
        _switch.registered = True
    _switch.handler = AlightCallbackHandler()
    for model_class in _MODEL_CLASSES:
        model_class.agenerate = _restoring_context(model_class.agenerate)  # type: ignore[method-assign]


def uninstrument() -> None:
    """Stop adding the handler; runs afterwards see exactly the callbacks they had before instrument()."""
    if _switch.handler is None:
        return
    _switch.handler = None
    for model_class in _MODEL_CLASSES:
        model_class.agenerate = model_class.agenerate.__wrapped__  # type: ignore[attr-defined,method-assign]


def is_instrumented() -> bool:
    return _switch.handler is not None


_MODEL_CLASSES: tuple[type[Any], ...] = (BaseChatModel, BaseLLM)


def _restoring_context(agenerate: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """Give back the caller's OpenTelemetry context when `agenerate` returns.

    The handler makes the model-call span current when the call starts (so the HTTP request carries it),
    but async LangChain reports the end from child tasks, which cannot undo that in the caller's context.
    """

    @functools.wraps(agenerate)
    async def agenerate_restoring(self: Any, *args: Any, **kwargs: Any) -> Any:
        token = otel_context.attach(otel_context.get_current())
        try:
            return await agenerate(self, *args, **kwargs)
        finally:
            otel_context.detach(token)

    return agenerate_restoring
