"""Codex session files (`$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl`), as the CLI writes them.

`session_meta` carries the base instructions (the system prompt); each `response_item` is one item of the
Responses API conversation. A run of items the model produced (assistant text, function calls, reasoning)
is one model call; its prompt is everything before it. Event and bookkeeping lines are skipped.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from alight_server.traces.formats.claude_code import session_files
from alight_server.traces.formats.content import Unrenderable, text_of
from alight_server.traces.formats.lines import json_lines
from alight_server.traces.model import Parsed, TraceCall, TraceSession, assistant, json_text, tool_call

MODEL_ITEMS = frozenset({"function_call", "custom_tool_call", "local_shell_call", "reasoning"})


def read(paths: Sequence[Path]) -> Parsed:
    parsed = Parsed()
    for path in session_files(paths):
        items: list[tuple[str, dict[str, Any]]] = []
        key, system, model = path.stem, None, None
        for number, line in json_lines(path, parsed.errors):
            payload = line.get("payload")
            if not isinstance(payload, dict):
                continue
            if line.get("type") == "session_meta":
                key = str(payload.get("id") or key)
                system = (payload.get("base_instructions") or {}).get("text")
            elif line.get("type") == "turn_context":
                model = payload.get("model") or model
            elif line.get("type") == "response_item":
                items.append((f"{path.name}:{number}", payload))
        session = _session(key, system, model, items)
        if session.calls:
            parsed.sessions.append(session)
    return parsed


def _by_model(item: dict[str, Any]) -> bool:
    return item.get("type") in MODEL_ITEMS or (item.get("type") == "message" and item.get("role") == "assistant")


def _session(key: str, system: Any, model: Any, items: list[tuple[str, dict[str, Any]]]) -> TraceSession:
    history: list[dict[str, Any]] = [{"role": "system", "content": system}] if isinstance(system, str) else []
    calls: list[TraceCall] = []
    problem: str | None = None
    task: Any = None
    for by_model, group in itertools.groupby(items, key=lambda found: _by_model(found[1])):
        if not by_model:
            for where, item in group:
                try:
                    history.extend(_input_message(item))
                except Unrenderable as exc:
                    problem = problem or f"{where}: {exc}"
                if task is None and item.get("role") == "user" and not _is_context(item):
                    task = {"prompt": text_of(item.get("content"))}
            continue
        run = [item for _, item in group]
        try:
            reply, bad = _reply(run), problem
        except Unrenderable as exc:
            reply, bad = assistant(None), problem or str(exc)
        calls.append(TraceCall(messages=list(history), reply=reply, model=model, flavour="responses", problem=bad))
        history.append(reply)
    return TraceSession(key=key, calls=calls, task=task)


def _is_context(item: dict[str, Any]) -> bool:
    """Codex's own environment message (cwd, shell), sent as a user turn before the task."""
    try:
        return text_of(item.get("content")).lstrip().startswith("<environment_context>")
    except Unrenderable:
        return False


def _input_message(item: dict[str, Any]) -> list[dict[str, Any]]:
    kind = item.get("type")
    if kind == "message":
        role = "system" if item.get("role") == "developer" else str(item.get("role"))
        return [{"role": role, "content": text_of(item.get("content"))}]
    if kind in ("function_call_output", "custom_tool_call_output", "local_shell_call_output"):
        return [{"role": "tool", "tool_call_id": item.get("call_id"), "content": json_text(item.get("output"))}]
    raise Unrenderable(f"a {kind!r} item has no chat form the template can render")


def _reply(run: list[dict[str, Any]]) -> dict[str, Any]:
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for item in run:
        kind = item.get("type")
        if kind == "message":
            texts.append(text_of(item.get("content")))
        elif kind == "function_call":
            calls.append(tool_call(item.get("call_id"), str(item.get("name")), item.get("arguments") or "{}"))
        elif kind == "custom_tool_call":
            calls.append(tool_call(item.get("call_id"), str(item.get("name")), item.get("input") or ""))
        elif kind == "local_shell_call":
            calls.append(tool_call(item.get("call_id"), "local_shell", item.get("action") or {}))
    return assistant("".join(texts) or None, calls)
