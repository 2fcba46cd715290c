"""A TracingProcessor that mirrors the Agents SDK's traces as OpenTelemetry spans alight understands."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import Any

from agents.tracing import Span, Trace, TracingProcessor
from agents.tracing.span_data import (
    AgentSpanData,
    FunctionSpanData,
    GenerationSpanData,
    GuardrailSpanData,
    HandoffSpanData,
    ResponseSpanData,
    TurnSpanData,
)
from opentelemetry import context as otel_context
from opentelemetry import trace as otel_trace
from opentelemetry.trace import Status, StatusCode

from alight import agent_header, semconv
from alight.integrations import clip_attribute

FRAMEWORK = "openai_agents"

# Spans whose work happens inside the SDK's own `with` block: while they are open, their OpenTelemetry
# twin is the active span, so the model's HTTP request (traceparent) and code inside a tool see it.
_ACTIVATED = (ResponseSpanData, GenerationSpanData, FunctionSpanData, GuardrailSpanData, HandoffSpanData)


@dataclass
class _Open:
    span: otel_trace.Span
    token: object | None  # from context.attach, when the span was made active
    agent: str | None = None  # the agent this span runs under: its model calls carry it (X-Alight-Agent)


class AlightTracingProcessor(TracingProcessor):
    """Bridge Agents SDK spans into OpenTelemetry; `enabled=False` makes it inert (uninstrument).

    The SDK's trace becomes a workflow span under whatever span is current (the `alight.rollout` root),
    agents become `invoke_agent` spans, responses/generations `chat` spans, function tools
    `execute_tool` spans, plus handoff and guardrail spans. Parents follow the SDK's own parent ids.
    While a response/generation span is open, the running agent's name is in the context too, so the
    model call carries it to the gateway (X-Alight-Agent, for routing to that agent's policy).
    """

    def __init__(self) -> None:
        self.enabled = False
        self._open: dict[str, _Open] = {}  # SDK trace or span id -> its OpenTelemetry twin
        self._lock = threading.Lock()

    def on_trace_start(self, trace: Trace) -> None:
        if not self.enabled:
            return
        span = _tracer().start_span(f"workflow {trace.name}", attributes={semconv.ATTR_FRAMEWORK: FRAMEWORK})
        with self._lock:
            self._open[trace.trace_id] = _Open(span, None)

    def on_trace_end(self, trace: Trace) -> None:
        with self._lock:
            opened = self._open.pop(trace.trace_id, None)
        if opened is not None:
            opened.span.end()

    def on_span_start(self, span: Span[Any]) -> None:
        if not self.enabled:
            return
        data = span.span_data
        with self._lock:
            parent = self._open.get(span.parent_id or "") or self._open.get(span.trace_id)
        parent_context = otel_trace.set_span_in_context(parent.span) if parent else None
        name, attributes = _describe_start(data)
        attributes[semconv.ATTR_FRAMEWORK] = FRAMEWORK
        otel_span = _tracer().start_span(name, context=parent_context, attributes=attributes)
        agent = data.name if isinstance(data, AgentSpanData) else parent.agent if parent else None
        token = None
        if isinstance(data, _ACTIVATED):
            active = otel_trace.set_span_in_context(otel_span)
            token = otel_context.attach(agent_header.with_agent(agent, active) if agent else active)
        with self._lock:
            self._open[span.span_id] = _Open(otel_span, token, agent)

    def on_span_end(self, span: Span[Any]) -> None:
        with self._lock:
            opened = self._open.pop(span.span_id, None)
        if opened is None:
            return
        otel_span = opened.span
        _describe_end(otel_span, span.span_data)
        if span.error:
            otel_span.set_status(Status(StatusCode.ERROR, str(span.error.get("message", ""))[:500]))
        # Detach only from the context we attached in: the SDK ends these spans in their own `with` block.
        if opened.token is not None and otel_trace.get_current_span() is otel_span:
            otel_context.detach(opened.token)  # type: ignore[arg-type]
        otel_span.end()

    def shutdown(self) -> None:
        """Nothing buffered here: spans go to the OpenTelemetry provider, which the alight SDK flushes."""

    def force_flush(self) -> None:
        """See shutdown()."""


def _tracer() -> otel_trace.Tracer:
    return otel_trace.get_tracer("alight.openai_agents")


def _describe_start(data: Any) -> tuple[str, dict[str, Any]]:
    """Span name and start attributes for one SDK span."""
    if isinstance(data, AgentSpanData):
        return f"{semconv.OP_INVOKE_AGENT} {data.name}", {
            semconv.GEN_AI_OPERATION_NAME: semconv.OP_INVOKE_AGENT,
            semconv.GEN_AI_AGENT_NAME: data.name,
        }
    if isinstance(data, ResponseSpanData | GenerationSpanData):
        model = getattr(data, "model", None)
        attributes: dict[str, Any] = {semconv.GEN_AI_OPERATION_NAME: semconv.OP_CHAT}
        if model:
            attributes[semconv.GEN_AI_REQUEST_MODEL] = str(model)
        return f"{semconv.OP_CHAT} {model or ''}".strip(), attributes
    if isinstance(data, FunctionSpanData):
        return f"{semconv.OP_EXECUTE_TOOL} {data.name}", {
            semconv.GEN_AI_OPERATION_NAME: semconv.OP_EXECUTE_TOOL,
            semconv.GEN_AI_TOOL_NAME: data.name,
        }
    if isinstance(data, HandoffSpanData):
        return f"handoff {data.from_agent}", {semconv.ATTR_HANDOFF_FROM: data.from_agent or ""}
    if isinstance(data, GuardrailSpanData):
        return f"guardrail {data.name}", {semconv.ATTR_GUARDRAIL_NAME: data.name}
    if isinstance(data, TurnSpanData):
        return f"turn {data.turn}", {semconv.GEN_AI_AGENT_NAME: data.agent_name}
    return f"{data.type} {getattr(data, 'name', '') or ''}".strip(), {}


def _describe_end(span: otel_trace.Span, data: Any) -> None:
    """Attributes only known when the SDK span ends: response ids, tool results, handoff targets."""
    if isinstance(data, ResponseSpanData) and data.response is not None:
        span.set_attribute(semconv.GEN_AI_RESPONSE_ID, data.response.id)
        span.set_attribute(semconv.GEN_AI_RESPONSE_MODEL, str(data.response.model))
        span.update_name(f"{semconv.OP_CHAT} {data.response.model}")
        _set_usage(span, data.usage or _usage_of(data.response))
    elif isinstance(data, GenerationSpanData):
        _set_usage(span, data.usage)
    elif isinstance(data, FunctionSpanData):
        span.set_attribute(semconv.GEN_AI_TOOL_CALL_ARGUMENTS, clip_attribute(data.input or ""))
        if data.output is not None:
            span.set_attribute(semconv.GEN_AI_TOOL_CALL_RESULT, clip_attribute(_text(data.output)))
    elif isinstance(data, HandoffSpanData):
        span.set_attribute(semconv.ATTR_HANDOFF_TO, data.to_agent or "")
        span.update_name(f"handoff {data.from_agent} -> {data.to_agent}")
    elif isinstance(data, GuardrailSpanData):
        span.set_attribute(semconv.ATTR_GUARDRAIL_TRIGGERED, bool(data.triggered))


def _usage_of(response: Any) -> dict[str, Any] | None:
    usage = getattr(response, "usage", None)
    return {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens} if usage else None


def _set_usage(span: otel_trace.Span, usage: dict[str, Any] | None) -> None:
    if not usage:
        return
    for key, attribute in (
        ("input_tokens", semconv.GEN_AI_USAGE_INPUT_TOKENS),
        ("output_tokens", semconv.GEN_AI_USAGE_OUTPUT_TOKENS),
    ):
        if isinstance(usage.get(key), int):
            span.set_attribute(attribute, usage[key])


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
