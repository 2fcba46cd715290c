"""OpenAI chat-completions logs: JSON Lines of `{"request": ..., "response": ...}`, as a gateway or proxy writes them.

Calls are put together into conversations in file order: a call whose messages start with an earlier call's
messages plus its reply continues that conversation; any other starts a new one. A response carrying vLLM's
`prompt_token_ids` and the choice's `token_ids` (and logprobs) is `exact`; the rest are rendered.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from alight_server.traces.formats.lines import json_lines
from alight_server.traces.model import Parsed, RecordError, TraceCall, TraceSession, first_prompt


def read(paths: Sequence[Path]) -> Parsed:
    parsed = Parsed()
    open_sessions: list[TraceSession] = []
    for path in paths:
        for number, record in json_lines(path, parsed.errors):
            where = f"{path.name}:{number}"
            try:
                call = _call(record)
            except ValueError as exc:
                parsed.errors.append(RecordError(where, str(exc)))
                continue
            session = next((s for s in reversed(open_sessions) if _continues(s.calls[-1], call)), None)
            if session is None:
                session = TraceSession(key=str(record.get("id") or where), calls=[], task=_task(record, call))
                open_sessions.append(session)
                parsed.sessions.append(session)
            session.calls.append(call)
    return parsed


def _call(record: dict[str, Any]) -> TraceCall:
    request, response = record.get("request"), record.get("response")
    if not isinstance(request, dict) or not isinstance(response, dict):
        raise ValueError(f"expected {{'request': {{...}}, 'response': {{...}}}}; got keys {sorted(record)[:8]}")
    messages = request.get("messages")
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise ValueError("request.messages must be a list of message objects (a chat-completions request)")
    choices = response.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ValueError("response.choices is missing or empty (a chat-completions response)")
    choice = choices[0]
    reply = choice.get("message")
    if not isinstance(reply, dict):
        raise ValueError("response.choices[0].message is missing")
    prompt_ids, response_ids = response.get("prompt_token_ids"), choice.get("token_ids")
    exact = _ints(prompt_ids) and _ints(response_ids)
    logprobs = None
    if exact:
        content = (choice.get("logprobs") or {}).get("content") or []
        logprobs = [float(item.get("logprob", 0.0)) for item in content if isinstance(item, dict)]
    tools = request.get("tools")
    return TraceCall(
        messages=list(messages),
        reply={k: v for k, v in reply.items() if k in ("role", "content", "tool_calls")},
        tools=tools if isinstance(tools, list) and tools else None,
        model=request.get("model") if isinstance(request.get("model"), str) else None,
        request=request,
        response=response,
        prompt_token_ids=list(prompt_ids) if exact and isinstance(prompt_ids, list) else None,
        response_token_ids=list(response_ids) if exact and isinstance(response_ids, list) else None,
        response_logprobs=logprobs,
        finish_reason=choice.get("finish_reason"),
    )


def _ints(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in value)


def _continues(previous: TraceCall, call: TraceCall) -> bool:
    extended = [_comparable(m) for m in (*previous.messages, previous.reply)]
    return [_comparable(m) for m in call.messages[: len(extended)]] == extended


def _comparable(message: dict[str, Any]) -> tuple[Any, ...]:
    calls = [(c.get("function") or {}).get("name") for c in message.get("tool_calls") or [] if isinstance(c, dict)]
    return (message.get("role"), message.get("content") or "", tuple(calls))


def _task(record: dict[str, Any], call: TraceCall) -> Any:
    """The record's own `task` when a logger added one, else the conversation's first user message."""
    return record["task"] if record.get("task") is not None else first_prompt(call.messages)
