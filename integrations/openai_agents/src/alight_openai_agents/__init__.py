"""alight integration for the OpenAI Agents SDK: agents, model calls, tools, handoffs and guardrails as spans."""

from __future__ import annotations

from alight_openai_agents.gateway import gateway_client, use_gateway
from alight_openai_agents.instrumentor import SUPPORTED_VERSIONS, instrument, is_instrumented, uninstrument
from alight_openai_agents.processor import AlightTracingProcessor

__all__ = [
    "SUPPORTED_VERSIONS",
    "AlightTracingProcessor",
    "gateway_client",
    "instrument",
    "is_instrumented",
    "uninstrument",
    "use_gateway",
]
