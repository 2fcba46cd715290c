"""instrument() / uninstrument() for AutoGen: model-call spans, tool arguments/results on autogen-core's spans.

autogen-core already emits `invoke_agent <name>` spans (one per agent run and per team turn) and
`execute_tool <name>` spans through the global OpenTelemetry provider, which alight exports under a
rollout; this integration adds what those lack instead of duplicating them.
"""

from __future__ import annotations

from typing import Any

from autogen_core.tools import FunctionTool
from autogen_ext.models.openai._openai_client import BaseOpenAIChatCompletionClient

from alight_autogen.model_spans import traced_create, traced_create_stream
from alight_autogen.tool_spans import enriched_run

# The autogen-agentchat versions this integration is tested against (lowest and highest ends); pyproject says the same.
SUPPORTED_VERSIONS = ">=0.7,<0.8"

# (class, method name, wrapper factory): each patch is undone by restoring `__wrapped__`.
_PATCHES: tuple[tuple[type[Any], str, Any], ...] = (
    (BaseOpenAIChatCompletionClient, "create", traced_create),
    (BaseOpenAIChatCompletionClient, "create_stream", traced_create_stream),
    (FunctionTool, "run", enriched_run),
)


def instrument() -> None:
    """Turn on alight spans for AutoGen. A second call is a no-op; safe outside a rollout."""
    if is_instrumented():
        return
    for owner, name, wrap in _PATCHES:
        setattr(owner, name, wrap(owner.__dict__[name]))


def uninstrument() -> None:
    """Restore the original methods."""
    if not is_instrumented():
        return
    for owner, name, _ in _PATCHES:
        setattr(owner, name, owner.__dict__[name].__wrapped__)


def is_instrumented() -> bool:
    return hasattr(BaseOpenAIChatCompletionClient.__dict__["create"], "__wrapped__")
