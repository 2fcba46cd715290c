"""Model-call spans around autogen-ext's OpenAI chat client, active while its HTTP request is made.

The request also carries the calling agent's name (X-Alight-Agent, for the gateway's routing): the name on
autogen-core's `invoke_agent` span that is current when the client is called (an agent's run, a team turn).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import AbstractContextManager
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from alight import agent_header, semconv

FRAMEWORK = "autogen"


def traced_create(create: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """Wrap `create`: one `chat` span, current while the client sends its request."""

    @functools.wraps(create)
    async def create_traced(self: Any, *args: Any, **kwargs: Any) -> Any:
        with _as_calling_agent(), _tracer().start_as_current_span(**_span_args(self)) as span:
            result = await create(self, *args, **kwargs)
            _describe_result(span, result)
            return result

    return create_traced


def traced_create_stream(
    create_stream: Callable[..., AsyncGenerator[Any, None]],
) -> Callable[..., AsyncGenerator[Any, None]]:
    """Wrap `create_stream`: the span is current only while the generator runs, never across a yield."""

    @functools.wraps(create_stream)
    async def create_stream_traced(self: Any, *args: Any, **kwargs: Any) -> AsyncGenerator[Any, None]:
        agent = _invoking_agent()
        span = _tracer().start_span(**_span_args(self))
        chunks = create_stream(self, *args, **kwargs)
        try:
            while True:
                with (
                    _as_calling_agent(agent),
                    trace.use_span(span, end_on_exit=False, record_exception=False, set_status_on_exception=False),
                ):
                    try:
                        item = await chunks.__anext__()
                    except StopAsyncIteration:
                        break
                if not isinstance(item, str):
                    _describe_result(span, item)
                yield item
        except BaseException as e:
            span.record_exception(e)
            span.set_status(Status(StatusCode.ERROR, f"{type(e).__name__}: {e}"[:500]))
            raise
        finally:
            await chunks.aclose()
            span.end()

    return create_stream_traced


def _invoking_agent() -> str | None:
    """The agent name on the current span when it is autogen-core's `invoke_agent` span, else None."""
    attributes = getattr(trace.get_current_span(), "attributes", None) or {}
    if attributes.get(semconv.GEN_AI_OPERATION_NAME) != semconv.OP_INVOKE_AGENT:
        return None
    name = attributes.get(semconv.GEN_AI_AGENT_NAME)
    return name if isinstance(name, str) and name else None


def _as_calling_agent(agent: str | None = None) -> AbstractContextManager[None]:
    """Model calls inside carry `agent` (default: the invoking agent now) as X-Alight-Agent."""
    name = agent or _invoking_agent()
    return agent_header.calling_agent(name) if name else contextlib.nullcontext()


def _tracer() -> trace.Tracer:
    return trace.get_tracer("alight.autogen")


def _span_args(client: Any) -> dict[str, Any]:
    model = str(getattr(client, "_create_args", {}).get("model") or "")
    attributes = {semconv.ATTR_FRAMEWORK: FRAMEWORK, semconv.GEN_AI_OPERATION_NAME: semconv.OP_CHAT}
    if model:
        attributes[semconv.GEN_AI_REQUEST_MODEL] = model
    return {"name": f"{semconv.OP_CHAT} {model}".strip(), "attributes": attributes}


def _describe_result(span: trace.Span, result: Any) -> None:
    usage = getattr(result, "usage", None)
    if usage is not None:
        span.set_attribute(semconv.GEN_AI_USAGE_INPUT_TOKENS, int(usage.prompt_tokens))
        span.set_attribute(semconv.GEN_AI_USAGE_OUTPUT_TOKENS, int(usage.completion_tokens))
