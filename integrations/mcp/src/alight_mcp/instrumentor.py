"""MCP client-session instrumentation: each request is a span, tools/call an execute_tool span with its result."""

from __future__ import annotations

import functools
import json
from collections.abc import Awaitable, Callable
from typing import Any

from mcp.client.session import ClientSession
from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode

import alight
from alight import semconv
from alight.integrations import clip_attribute
from alight_mcp.rewards import reward_in_result

# The mcp versions this instrumentation is tested against (lowest and highest ends); pyproject says the same.
SUPPORTED_VERSIONS = ">=2.0,<3"
FRAMEWORK = "mcp"
_TOOL_CALL = "tools/call"


def instrument() -> None:
    """Wrap ClientSession.send_request (every MCP request goes through it). A second call is a no-op."""
    if is_instrumented():
        return
    ClientSession.send_request = _traced(ClientSession.send_request)  # type: ignore[method-assign]


def uninstrument() -> None:
    """Restore the original ClientSession.send_request."""
    if is_instrumented():
        ClientSession.send_request = ClientSession.send_request.__wrapped__  # type: ignore[attr-defined,method-assign]


def is_instrumented() -> bool:
    return hasattr(ClientSession.send_request, "__wrapped__")


def _traced(send_request: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    @functools.wraps(send_request)
    async def send_request_traced(self: ClientSession, request: Any, *args: Any, **kwargs: Any) -> Any:
        method = getattr(request, "method", None) or "request"
        params = getattr(request, "params", None)
        tracer = trace.get_tracer("alight.mcp")
        if method != _TOOL_CALL:
            with tracer.start_as_current_span(f"mcp {method}") as span:
                span.set_attributes({semconv.ATTR_FRAMEWORK: FRAMEWORK, semconv.ATTR_MCP_METHOD: method})
                return await send_request(self, request, *args, **kwargs)
        name = str(getattr(params, "name", "") or "")
        with tracer.start_as_current_span(f"{semconv.OP_EXECUTE_TOOL} {name}") as span:
            span.set_attributes(
                {
                    semconv.ATTR_FRAMEWORK: FRAMEWORK,
                    semconv.ATTR_MCP_METHOD: method,
                    semconv.GEN_AI_OPERATION_NAME: semconv.OP_EXECUTE_TOOL,
                    semconv.GEN_AI_TOOL_NAME: name,
                    semconv.GEN_AI_TOOL_CALL_ARGUMENTS: clip_attribute(_json(getattr(params, "arguments", None) or {})),
                }
            )
            result = await send_request(self, request, *args, **kwargs)
            _record_result(span, name, result)
            return result

    return send_request_traced


def _record_result(span: Span, tool: str, result: Any) -> None:
    span.set_attribute(semconv.GEN_AI_TOOL_CALL_RESULT, clip_attribute(result_text(result)))
    if getattr(result, "is_error", False):
        span.set_status(Status(StatusCode.ERROR, clip_attribute(result_text(result), 500)))
    reward = reward_in_result(result)
    if reward is not None:
        # Recorded on the tool span (the current span here), which links the reward to this step.
        alight.reward(reward.value, name=reward.name or f"tool:{tool}", final=reward.final)


def result_text(result: Any) -> str:
    """What the tool returned, as the model would read it: structured content as JSON, else the text blocks."""
    structured = getattr(result, "structured_content", None)
    if structured is not None:
        return _json(structured)
    parts = [getattr(block, "text", None) or f"<{getattr(block, 'type', 'content')}>" for block in result.content]
    return "\n".join(parts)


def _json(value: Any) -> str:
    return json.dumps(value, default=str, ensure_ascii=False)
