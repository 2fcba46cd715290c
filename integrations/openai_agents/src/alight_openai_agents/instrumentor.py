"""instrument() / uninstrument() for the OpenAI Agents SDK: registers the alight TracingProcessor once."""

from __future__ import annotations

import os
from dataclasses import dataclass

from agents import set_trace_processors, set_tracing_disabled
from agents.tracing import add_trace_processor
from agents.tracing.processors import default_processor

from alight import envvars
from alight_openai_agents.processor import AlightTracingProcessor

# The openai-agents versions this integration is tested against (lowest and highest ends); pyproject says the same.
SUPPORTED_VERSIONS = ">=0.21,<0.25"


@dataclass
class _State:
    processor: AlightTracingProcessor | None = None
    removed_openai_export: bool = False
    enabled_tracing: bool = False  # the controller's environment had turned the SDK's tracing off


_state = _State()


def instrument() -> None:
    """Mirror Agents SDK traces as alight spans. A second call is a no-op; safe outside a rollout.

    Under a rollout OPENAI_API_KEY is the attempt token, and the SDK's default exporter would send it
    to api.openai.com with every trace upload; so while an attempt is active alight's processor
    replaces the default one (uninstrument() puts it back). The controller turns the SDK's tracing off
    for attempts (OPENAI_AGENTS_DISABLE_TRACING) so that an uninstrumented agent leaks nothing; with the
    default exporter gone, tracing goes back on here, for alight's processor alone.
    """
    if _state.processor is not None and _state.processor.enabled:
        return
    if _state.processor is None:
        _state.processor = AlightTracingProcessor()
        if os.environ.get(envvars.ALIGHT_TOKEN):
            set_trace_processors([_state.processor])
            _state.removed_openai_export = True
            if _env_disabled():
                set_tracing_disabled(False)
                _state.enabled_tracing = True
        else:
            add_trace_processor(_state.processor)
    _state.processor.enabled = True


def uninstrument() -> None:
    """Make the processor inert and restore the SDK's default exporter if instrument() removed it."""
    if _state.processor is None:
        return
    _state.processor.enabled = False
    if _state.removed_openai_export:
        if _state.enabled_tracing:  # the default exporter comes back: so does the switch that kept it quiet
            set_tracing_disabled(True)
            _state.enabled_tracing = False
        set_trace_processors([default_processor()])
        _state.removed_openai_export = False
        _state.processor = None


def _env_disabled() -> bool:
    return os.environ.get(envvars.OPENAI_AGENTS_DISABLE_TRACING, "").lower() in ("1", "true")


def is_instrumented() -> bool:
    return _state.processor is not None and _state.processor.enabled
