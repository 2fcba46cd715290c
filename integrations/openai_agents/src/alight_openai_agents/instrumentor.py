"""instrument() / uninstrument() for the OpenAI Agents SDK: registers the alight TracingProcessor once."""

from __future__ import annotations

import os
from dataclasses import dataclass

from agents import set_trace_processors
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


_state = _State()


def instrument() -> None:
    """Mirror Agents SDK traces as alight spans. A second call is a no-op; safe outside a rollout.

    Under a rollout OPENAI_API_KEY is the attempt token, and the SDK's default exporter would send it
    to api.openai.com with every trace upload; so while an attempt is active alight's processor
    replaces the default one (uninstrument() puts it back).
    """
    if _state.processor is not None and _state.processor.enabled:
        return
    if _state.processor is None:
        _state.processor = AlightTracingProcessor()
        if os.environ.get(envvars.ALIGHT_TOKEN):
            set_trace_processors([_state.processor])
            _state.removed_openai_export = True
        else:
            add_trace_processor(_state.processor)
    _state.processor.enabled = True


def uninstrument() -> None:
    """Make the processor inert and restore the SDK's default exporter if instrument() removed it."""
    if _state.processor is None:
        return
    _state.processor.enabled = False
    if _state.removed_openai_export:
        set_trace_processors([default_processor()])
        _state.removed_openai_export = False
        _state.processor = None


def is_instrumented() -> bool:
    return _state.processor is not None and _state.processor.enabled
