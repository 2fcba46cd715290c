"""OpenTelemetry GenAI spans in OTLP files (JSON, JSON Lines as the collector's file exporter writes, or protobuf).

Which spans are model calls, the three forms of the semantic conventions their messages are read from, and what
a trace becomes: docs/traces.md "Import", its OpenTelemetry paragraph.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fastapi import HTTPException

from alight import semconv
from alight_server.traces.formats.content import Unrenderable, text_of
from alight_server.traces.formats.lines import base_suffix, read_bytes, read_text
from alight_server.traces.model import (
    Parsed,
    RecordError,
    TraceCall,
    TraceReward,
    TraceSession,
    assistant,
    chat_message,
    first_prompt,
    json_text,
    tool_call,
)
from alight_server.traces.otlp import JSON, PROTOBUF, attributes, parse_request

MODEL_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})
MESSAGE_EVENTS = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}

Span = dict[str, Any]


def read(paths: Sequence[Path]) -> Parsed:
    parsed = Parsed()
    traces: dict[str, list[Span]] = {}
    for path in paths:
        for span in _spans(path, parsed):
            traces.setdefault(span["trace_id"], []).append(span)
    for trace_id, spans in traces.items():
        spans.sort(key=lambda s: (s["start"], s["span_id"]))
        session = TraceSession(key=trace_id, calls=[])
        for span in spans:
            session.rewards.extend(_rewards(span))
            if not _is_model_call(span):
                continue
            try:
                call = _call(span)
            except (ValueError, Unrenderable) as exc:
                parsed.errors.append(RecordError(f"{span['file']}:span {span['span_id']}", str(exc)))
                continue
            session.calls.append(call)
            session.task = session.task if session.task is not None else first_prompt(call.messages)
        if session.calls:
            parsed.sessions.append(session)
    return parsed


def _spans(path: Path, parsed: Parsed) -> list[Span]:
    """The file's spans as plain dicts; a file or line that is not OTLP is one error, the rest still read."""
    bodies: list[tuple[str, bytes, str]] = []
    if base_suffix(path) in (".pb", ".bin", ".protobuf"):
        bodies.append((path.name, read_bytes(path), PROTOBUF))
    else:
        text = read_text(path).strip()
        chunks = [text] if text.startswith("{") and "\n{" not in text else text.splitlines()
        bodies.extend((f"{path.name}:{i}", chunk.encode(), JSON) for i, chunk in enumerate(chunks, 1) if chunk.strip())
    out: list[Span] = []
    for where, body, media in bodies:
        try:
            message = parse_request(body, media)
        except HTTPException as exc:
            parsed.errors.append(RecordError(where, f"not an OTLP trace export: {exc.detail}"))
            continue
        for resource_spans in message.resource_spans:
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    out.append(
                        {
                            "file": path.name,
                            "trace_id": span.trace_id.hex(),
                            "span_id": span.span_id.hex(),
                            "name": span.name,
                            "start": span.start_time_unix_nano,
                            "attributes": attributes(span.attributes),
                            "events": [(e.name, attributes(e.attributes)) for e in span.events],
                        }
                    )
    return out


def _is_model_call(span: Span) -> bool:
    attrs = span["attributes"]
    if attrs.get(semconv.GEN_AI_OPERATION_NAME) in MODEL_OPERATIONS:
        return True
    return "gen_ai.input.messages" in attrs or "gen_ai.prompt.0.role" in attrs


def _rewards(span: Span) -> list[TraceReward]:
    out = []
    for name, attrs in span["events"]:
        value = attrs.get(semconv.ATTR_REWARD_VALUE)
        if name == semconv.EVENT_REWARD and isinstance(value, int | float) and not isinstance(value, bool):
            name_attr = attrs.get(semconv.ATTR_REWARD_NAME)
            final = attrs.get(semconv.ATTR_REWARD_FINAL, True)
            out.append(TraceReward(float(value), str(name_attr) if name_attr else None, bool(final)))
    return out


def _call(span: Span) -> TraceCall:
    attrs = span["attributes"]
    readings = (reader(span) for reader in (_current, _indexed, _events))  # lazily: the first form found wins
    found = next((reading for reading in readings if reading is not None), None)
    if found is None:
        raise ValueError(
            f"GenAI span {span['name']!r} has no message content in a form this reader knows (gen_ai.input.messages,"
            " gen_ai.prompt.N.*, gen_ai.*.message events); was content capture on "
            "(OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT)?"
        )
    messages, reply = found
    tools = _json(attrs.get("gen_ai.tool.definitions"))
    model = attrs.get("gen_ai.request.model") or attrs.get("gen_ai.response.model")
    finish = attrs.get("gen_ai.response.finish_reasons")
    return TraceCall(
        messages=messages,
        reply=reply,
        tools=tools if isinstance(tools, list) and tools else None,
        model=str(model) if model else None,
        finish_reason=finish[0] if isinstance(finish, list) and finish else None,
    )


def _json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


# ---- 1. current: gen_ai.input.messages / gen_ai.output.messages with parts


def _current(span: Span) -> tuple[list[dict[str, Any]], dict[str, Any]] | None:
    attrs = span["attributes"]
    raw_in, raw_out = _json(attrs.get("gen_ai.input.messages")), _json(attrs.get("gen_ai.output.messages"))
    if raw_in is None:
        return None
    if not isinstance(raw_in, list) or not isinstance(raw_out, list | None):
        raise ValueError("gen_ai.input.messages / gen_ai.output.messages must be JSON arrays of messages")
    messages: list[dict[str, Any]] = []
    system = _json(attrs.get("gen_ai.system_instructions"))
    if system:
        messages.append({"role": "system", "content": _parts_text(system)})
    for message in raw_in:
        messages.extend(_from_parts(message))
    replies = [m for message in raw_out or [] for m in _from_parts(message)]
    return messages, replies[0] if replies else assistant(None)


def _parts_text(parts: Any) -> str:
    if isinstance(parts, str):
        return parts
    return "".join(str(p.get("content", "")) for p in parts if isinstance(p, dict) and p.get("type") == "text")


def _from_parts(message: Any) -> list[dict[str, Any]]:
    if not isinstance(message, dict) or not isinstance(message.get("parts"), list):
        raise ValueError(f"a GenAI message must be an object with 'role' and 'parts'; got {str(message)[:80]!r}")
    role, texts, calls, results = str(message.get("role")), [], [], []
    for part in message["parts"]:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            texts.append(str(part.get("content", "")))
        elif kind == "tool_call":
            calls.append(tool_call(part.get("id"), str(part.get("name")), part.get("arguments") or {}))
        elif kind == "tool_call_response":
            results.append(chat_message("tool", json_text(part.get("response")), call_id=part.get("id")))
        elif kind == "reasoning":
            continue
        else:
            raise Unrenderable(f"a {kind!r} message part has no text form the chat template can render")
    return results or [chat_message(role, "".join(texts), calls)]


# ---- 2. previous, indexed attributes: gen_ai.prompt.N.* / gen_ai.completion.N.*


def _indexed(span: Span) -> tuple[list[dict[str, Any]], dict[str, Any]] | None:
    attrs = span["attributes"]
    if "gen_ai.prompt.0.role" not in attrs and "gen_ai.prompt.0.content" not in attrs:
        return None
    messages = _indexed_messages(attrs, "gen_ai.prompt")
    replies = _indexed_messages(attrs, "gen_ai.completion")
    return messages, replies[0] if replies else assistant(None)


def _indexed_messages(attrs: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    out = []
    n = 0
    while f"{prefix}.{n}.role" in attrs or f"{prefix}.{n}.content" in attrs:
        at = f"{prefix}.{n}"
        role = str(attrs.get(f"{at}.role") or ("assistant" if prefix == "gen_ai.completion" else "user"))
        calls = []
        m = 0
        while f"{at}.tool_calls.{m}.name" in attrs:
            tc = f"{at}.tool_calls.{m}"
            calls.append(
                tool_call(attrs.get(f"{tc}.id"), str(attrs[f"{tc}.name"]), attrs.get(f"{tc}.arguments") or "{}")
            )
            m += 1
        text = text_of(_json(attrs.get(f"{at}.content")))
        out.append(chat_message(role, text, calls, call_id=attrs.get(f"{at}.tool_call_id")))
        n += 1
    return out


# ---- 3. previous, events: gen_ai.*.message and gen_ai.choice


def _events(span: Span) -> tuple[list[dict[str, Any]], dict[str, Any]] | None:
    messages: list[dict[str, Any]] = []
    reply: dict[str, Any] | None = None
    for name, attrs in span["events"]:
        body = _json(attrs.get("gen_ai.event.content")) if "gen_ai.event.content" in attrs else attrs
        if not isinstance(body, dict):
            continue
        if name in MESSAGE_EVENTS:
            messages.append(_event_message(MESSAGE_EVENTS[name], body))
        elif name == "gen_ai.choice" and reply is None:
            message = _json(body.get("message")) or {}
            reply = _event_message("assistant", message if isinstance(message, dict) else {"content": message})
    if not messages and reply is None:
        return None
    return messages, reply or assistant(None)


def _event_message(role: str, body: dict[str, Any]) -> dict[str, Any]:
    text, calls = text_of(_json(body.get("content"))), []
    if role == "assistant":
        raw = _json(body.get("tool_calls")) or []
        functions = [(c.get("id"), c.get("function") or {}) for c in raw if isinstance(c, dict)]
        calls = [tool_call(call_id, str(f.get("name")), f.get("arguments") or {}) for call_id, f in functions]
    return chat_message(role, text, calls, call_id=body.get("id"))
