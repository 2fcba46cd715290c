"""alight integration for AutoGen AgentChat: model calls and tool results on top of autogen-core's own spans."""

from __future__ import annotations

from alight_autogen.gateway import POLICY_MODEL_INFO, gateway_model_client
from alight_autogen.instrumentor import SUPPORTED_VERSIONS, instrument, is_instrumented, uninstrument

__all__ = [
    "POLICY_MODEL_INFO",
    "SUPPORTED_VERSIONS",
    "gateway_model_client",
    "instrument",
    "is_instrumented",
    "uninstrument",
]
