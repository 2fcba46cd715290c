"""A LangChain callback handler that turns chat models, tools, agents and LangGraph nodes into OpenTelemetry spans."""

from __future__ import annotations

import contextlib
import contextvars
import json
import threading
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.outputs import LLMResult
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from alight import agent_header, semconv
from alight.integrations import clip_attribute

FRAMEWORK = "langchain"
_NODE_KEY = "langgraph_node"  # metadata LangGraph puts on every run inside a node
_AGENT_KEY = "lc_agent_name"  # metadata LangChain's create_agent(name=...) puts on its runs


@dataclass
class _Run:
    span: trace.Span | None  # None: a chain alight does not show; its children hang under `parent`
    parent: trace.Span | None
    token: object | None = None  # from context.attach, when the span was made active
    agent: str | None = None  # the top-level runnable's name, inherited by the runs under it


class AlightCallbackHandler(BaseCallbackHandler):
    """Spans for one process's LangChain runs; the parents follow LangChain's run ids.

    A top-level chain (a LangGraph graph, `create_react_agent`, an LCEL chain) is an `invoke_agent` span
    named after the runnable; a LangGraph node is a `node <name>` span; chat models are `chat` spans that
    stay active while their HTTP request is made; tools are `execute_tool` spans. Other chains are
    folded into their parent to keep the tree readable. A model call carries its agent to the gateway
    (X-Alight-Agent, for routing): `create_agent`'s name, else the LangGraph node, else the top-level runnable.
    """

    run_inline = True  # called in the caller's context, so the chat span is current for the HTTP call
    raise_error = False

    def __init__(self) -> None:
        self._runs: dict[UUID, _Run] = {}
        self._lock = threading.Lock()

    # chains: agents and graph nodes
    def on_chain_start(
        self,
        serialized: dict[str, Any] | None,
        inputs: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        name = kwargs.get("name") or _serialized_name(serialized) or "chain"
        parent = self._parent(parent_run_id)
        node = (metadata or {}).get(_NODE_KEY)
        agent = name if parent_run_id is None else self._agent(parent_run_id)
        if parent_run_id is None:
            attributes = {semconv.GEN_AI_OPERATION_NAME: semconv.OP_INVOKE_AGENT, semconv.GEN_AI_AGENT_NAME: name}
            self._start(run_id, parent, f"{semconv.OP_INVOKE_AGENT} {name}", attributes, activate=False, agent=agent)
        elif node == name and any(tag.startswith("graph:step:") for tag in kwargs.get("tags") or []):
            self._start(run_id, parent, f"node {name}", {semconv.ATTR_GRAPH_NODE: name}, activate=False, agent=agent)
        else:
            with self._lock:
                self._runs[run_id] = _Run(span=None, parent=parent, agent=agent)

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._end(run_id)

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._end(run_id, error)

    # model calls
    def on_chat_model_start(
        self,
        serialized: dict[str, Any] | None,
        messages: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        self._start_model(run_id, parent_run_id, semconv.OP_CHAT, kwargs)

    def on_llm_start(
        self,
        serialized: dict[str, Any] | None,
        prompts: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        self._start_model(run_id, parent_run_id, semconv.OP_TEXT_COMPLETION, kwargs)

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        run = self._runs.get(run_id)
        if run is not None and run.span is not None:
            _describe_response(run.span, response)
        self._end(run_id)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._end(run_id, error)

    # tools
    def on_tool_start(
        self,
        serialized: dict[str, Any] | None,
        input_str: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        inputs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        name = kwargs.get("name") or _serialized_name(serialized) or "tool"
        attributes = {
            semconv.GEN_AI_OPERATION_NAME: semconv.OP_EXECUTE_TOOL,
            semconv.GEN_AI_TOOL_NAME: name,
            semconv.GEN_AI_TOOL_CALL_ARGUMENTS: clip_attribute(_text(inputs) if inputs is not None else input_str),
        }
        if kwargs.get("tool_call_id"):
            attributes[semconv.GEN_AI_TOOL_CALL_ID] = str(kwargs["tool_call_id"])
        span_name = f"{semconv.OP_EXECUTE_TOOL} {name}"
        agent = self._agent(parent_run_id)
        self._start(run_id, self._parent(parent_run_id), span_name, attributes, activate=True, agent=agent)

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        run = self._runs.get(run_id)
        if run is not None and run.span is not None:
            run.span.set_attribute(
                semconv.GEN_AI_TOOL_CALL_RESULT, clip_attribute(_text(getattr(output, "content", output)))
            )
        self._end(run_id)

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._end(run_id, error)

    # bookkeeping
    def _start_model(self, run_id: UUID, parent_run_id: UUID | None, operation: str, kwargs: dict[str, Any]) -> None:
        params = kwargs.get("invocation_params") or {}
        model = params.get("model") or params.get("model_name") or (kwargs.get("metadata") or {}).get("ls_model_name")
        attributes: dict[str, Any] = {semconv.GEN_AI_OPERATION_NAME: operation}
        if model:
            attributes[semconv.GEN_AI_REQUEST_MODEL] = str(model)
        name = f"{operation} {model or ''}".strip()
        agent = _calling_agent(kwargs.get("metadata")) or self._agent(parent_run_id)
        self._start(run_id, self._parent(parent_run_id), name, attributes, activate=True, agent=agent)

    def _agent(self, parent_run_id: UUID | None) -> str | None:
        run = self._runs.get(parent_run_id) if parent_run_id is not None else None
        return run.agent if run is not None else None

    def _parent(self, parent_run_id: UUID | None) -> trace.Span | None:
        run = self._runs.get(parent_run_id) if parent_run_id is not None else None
        if run is None:
            return None  # not ours: the current OpenTelemetry span (e.g. alight.rollout) is the parent
        return run.span or run.parent

    def _start(
        self,
        run_id: UUID,
        parent: trace.Span | None,
        name: str,
        attributes: dict[str, Any],
        *,
        activate: bool,
        agent: str | None = None,
    ) -> None:
        attributes[semconv.ATTR_FRAMEWORK] = FRAMEWORK
        context = trace.set_span_in_context(parent) if parent is not None else None
        span = trace.get_tracer("alight.langchain").start_span(name, context=context, attributes=attributes)
        token = None
        if activate:
            active = trace.set_span_in_context(span)
            token = otel_context.attach(agent_header.with_agent(agent, active) if agent else active)
        with self._lock:
            self._runs[run_id] = _Run(span=span, parent=parent, token=token, agent=agent)

    def _end(self, run_id: UUID, error: BaseException | None = None) -> None:
        with self._lock:
            run = self._runs.pop(run_id, None)
        if run is None or run.span is None:
            return
        if error is not None:
            run.span.record_exception(error)
            run.span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"[:500]))
        if run.token is not None:
            _detach(run.token)
        run.span.end()


def _detach(token: object) -> None:
    """Undo an attach made when the run started, if this is still the context it was made in.

    Async `agenerate` reports `on_llm_end` from child tasks (asyncio.gather), whose contexts are copies:
    there the reset is refused, and the `agenerate` wrapper in instrumentor.py restores the caller's context.
    """
    if isinstance(token, contextvars.Token):
        with contextlib.suppress(ValueError):
            token.var.reset(token)
    else:
        otel_context.detach(token)  # type: ignore[arg-type]


def _describe_response(span: trace.Span, response: LLMResult) -> None:
    output = response.llm_output or {}
    message = (
        getattr(response.generations[0][0], "message", None)
        if response.generations and response.generations[0]
        else None
    )
    metadata = getattr(message, "response_metadata", None) or {}
    response_id = output.get("id") or metadata.get("id")
    if response_id:
        span.set_attribute(semconv.GEN_AI_RESPONSE_ID, str(response_id))
    model = output.get("model_name") or metadata.get("model_name")
    if model:
        span.set_attribute(semconv.GEN_AI_RESPONSE_MODEL, str(model))
    usage = getattr(message, "usage_metadata", None) or {}
    if isinstance(usage.get("input_tokens"), int):
        span.set_attribute(semconv.GEN_AI_USAGE_INPUT_TOKENS, usage["input_tokens"])
    if isinstance(usage.get("output_tokens"), int):
        span.set_attribute(semconv.GEN_AI_USAGE_OUTPUT_TOKENS, usage["output_tokens"])


def _calling_agent(metadata: dict[str, Any] | None) -> str | None:
    """The agent a model run belongs to by its metadata: create_agent's name, else the LangGraph node."""
    for key in (_AGENT_KEY, _NODE_KEY):
        value = (metadata or {}).get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _serialized_name(serialized: dict[str, Any] | None) -> str | None:
    if not serialized:
        return None
    ids = serialized.get("id")
    return serialized.get("name") or (ids[-1] if isinstance(ids, list) and ids else None)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
