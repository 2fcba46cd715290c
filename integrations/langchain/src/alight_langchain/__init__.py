"""alight integration for LangChain and LangGraph: chat models, tools, agents and graph nodes as spans."""

from __future__ import annotations

from alight_langchain.gateway import gateway_chat_model
from alight_langchain.handler import AlightCallbackHandler
from alight_langchain.instrumentor import SUPPORTED_VERSIONS, instrument, is_instrumented, uninstrument

__all__ = [
    "SUPPORTED_VERSIONS",
    "AlightCallbackHandler",
    "gateway_chat_model",
    "instrument",
    "is_instrumented",
    "uninstrument",
]
