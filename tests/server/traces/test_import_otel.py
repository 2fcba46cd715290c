"""OpenTelemetry GenAI spans: written by the OpenTelemetry SDK, encoded by its OTLP exporter, read back per version."""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Span

from alight_server.traces.formats import otel
from alight_server.traces.importer import import_traces
from alight_server.trajectories.join import build_trajectory

QUESTION, ANSWER = "What is the weather in Paris?", "It is sunny in Paris."
ARGS = {"city": "Paris"}


def current(span: Span) -> None:
    """gen_ai.input.messages / gen_ai.output.messages (semantic conventions 1.37 and later)."""
    span.set_attribute("gen_ai.system_instructions", json.dumps([{"type": "text", "content": "Be brief."}]))
    span.set_attribute("gen_ai.input.messages", json.dumps([
        {"role": "user", "parts": [{"type": "text", "content": QUESTION}]},
        {"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "get_weather", "arguments": ARGS}]},
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": "sunny"}]},
    ]))  # fmt: skip
    span.set_attribute("gen_ai.output.messages", json.dumps([
        {"role": "assistant", "parts": [{"type": "text", "content": ANSWER}], "finish_reason": "stop"}
    ]))  # fmt: skip


def indexed(span: Span) -> None:
    """gen_ai.prompt.N.* / gen_ai.completion.N.* attributes (the previous versions, OpenLLMetry's form)."""
    attrs = {
        "gen_ai.prompt.0.role": "system", "gen_ai.prompt.0.content": "Be brief.",
        "gen_ai.prompt.1.role": "user", "gen_ai.prompt.1.content": QUESTION,
        "gen_ai.prompt.2.role": "assistant", "gen_ai.prompt.2.tool_calls.0.id": "c1",
        "gen_ai.prompt.2.tool_calls.0.name": "get_weather", "gen_ai.prompt.2.tool_calls.0.arguments": json.dumps(ARGS),
        "gen_ai.prompt.3.role": "tool", "gen_ai.prompt.3.content": "sunny", "gen_ai.prompt.3.tool_call_id": "c1",
        "gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.content": ANSWER,
    }  # fmt: skip
    span.set_attributes(attrs)


def events(span: Span) -> None:
    """gen_ai.*.message and gen_ai.choice events (semantic conventions 1.28 to 1.36)."""
    span.add_event("gen_ai.system.message", {"content": "Be brief."})
    span.add_event("gen_ai.user.message", {"content": QUESTION})
    calls = [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": json.dumps(ARGS)}}]
    span.add_event("gen_ai.assistant.message", {"tool_calls": json.dumps(calls)})
    span.add_event("gen_ai.tool.message", {"content": "sunny", "id": "c1"})
    span.add_event("gen_ai.choice", {"index": 0, "finish_reason": "stop", "message": json.dumps({"content": ANSWER})})


def _export(tmp_path: Path, writers: list[Callable[[Span], None]], *, protobuf: bool, gz: bool = False) -> Path:
    """One trace per writer, each: an agent span holding a chat span, and a reward event; as one OTLP file."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    for write in writers:
        with tracer.start_as_current_span("invoke_agent weather") as root:
            with tracer.start_as_current_span("chat policy") as span:
                span.set_attribute("gen_ai.operation.name", "chat")
                span.set_attribute("gen_ai.request.model", "policy")
                write(span)
            root.add_event("alight.reward", {"alight.reward.value": 0.5, "alight.reward.final": True})
    return _write(tmp_path, exporter, protobuf=protobuf, gz=gz)


def _write(tmp_path: Path, exporter: InMemorySpanExporter, *, protobuf: bool, gz: bool = False) -> Path:
    """The finished spans as one OTLP export: protobuf, or JSON as the collector's file exporter writes it."""
    message = encode_spans(exporter.get_finished_spans())
    if protobuf:
        path = tmp_path / ("spans.pb.gz" if gz else "spans.pb")
        raw = message.SerializeToString()
        path.write_bytes(gzip.compress(raw) if gz else raw)
    else:  # the collector's file exporter: one JSON export request per line, ids in hex
        path = tmp_path / "spans.jsonl"
        payload: dict[str, Any] = json_format.MessageToDict(message)
        for rs in payload["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for s in ss["spans"]:
                    for key in ("traceId", "spanId", "parentSpanId"):
                        if key in s:
                            s[key] = base64.b64decode(s[key]).hex()
        path.write_text(json.dumps(payload) + "\n")
    return path


@pytest.mark.parametrize(
    ("protobuf", "gz"), [(False, False), (True, False), (True, True)], ids=["otlp-json", "otlp-protobuf", "pb-gzip"]
)
def test_each_version_of_the_genai_conventions_imports_the_same_conversation(tmp_path, store, renderer, protobuf, gz):
    path = _export(tmp_path, [current, indexed, events], protobuf=protobuf, gz=gz)
    parsed = otel.read([path])
    assert parsed.errors == []
    expected_messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": json.dumps(ARGS)}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    ]  # fmt: skip
    assert len(parsed.sessions) == 3
    for session in parsed.sessions:
        (call,) = session.calls
        assert call.messages == expected_messages
        assert call.reply == {"role": "assistant", "content": ANSWER}
        assert [(r.value, r.final) for r in session.rewards] == [(0.5, True)]
    report = import_traces(store, "spans", "otel", parsed, renderer)
    assert (report.sessions, report.calls["rendered"]) == (3, 3)
    trajectories = [build_trajectory(store, r.id) for r in store.list_rollouts()]
    assert {t.final_reward for t in trajectories} == {0.5}
    prompts = {tuple(t.calls[0].call.prompt_token_ids) for t in trajectories}
    assert len(prompts) == 1  # three versions, one conversation, one rendering
    assert renderer.decode(trajectories[0].calls[0].call.response_token_ids) == ANSWER + "<|im_end|>"


def test_a_genai_span_without_content_is_reported_and_the_rest_imported(tmp_path, renderer):
    path = _export(tmp_path, [current, lambda span: None], protobuf=False)  # content capture off for the second
    parsed = otel.read([path])
    assert len(parsed.sessions) == 1
    (error,) = parsed.errors
    assert "spans.jsonl:span" in error.where and "no message content" in error.message
    assert "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT" in error.message


def test_spans_of_the_official_openai_instrumentation_import_the_conversation_the_client_sent(
    tmp_path, store, renderer, upstream_url, monkeypatch
):
    """opentelemetry-instrumentation-openai-v2 around a real OpenAI client, content on spans (the latest conventions)."""
    instrumentation = pytest.importorskip("opentelemetry.instrumentation.openai_v2", reason="pip install '.[dev]'")
    from openai import OpenAI

    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = instrumentation.OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        client = OpenAI(base_url=upstream_url, api_key="sk-test")
        messages: list[Any] = [{"role": "user", "content": "call get_weather"}]
        replies = []
        with provider.get_tracer("app").start_as_current_span("invoke_agent weather"):  # one agent run, one trace
            for _ in range(2):
                answer = client.chat.completions.create(model="policy", messages=messages).choices[0].message
                replies.append(answer)
                messages.append({"role": "assistant", "content": answer.content})
                messages.append({"role": "user", "content": "and tomorrow?"})
    finally:
        instrumentor.uninstrument()
    parsed = otel.read([_write(tmp_path, exporter, protobuf=False)])
    assert parsed.errors == []
    (session,) = parsed.sessions
    assert [c.messages for c in session.calls] == [messages[:1], messages[:3]]
    assert [c.reply["content"] for c in session.calls] == [r.content for r in replies]
    report = import_traces(store, "instrumented", "otel", parsed, renderer)
    assert (report.sessions, report.calls["rendered"]) == (1, 2)
    (rollout,) = store.list_rollouts()
    calls = store.list_model_calls(rollout.id)
    assert calls[1].prompt_token_ids[: len(calls[0].prompt_token_ids)] == calls[0].prompt_token_ids
