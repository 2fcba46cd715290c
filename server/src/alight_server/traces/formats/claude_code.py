"""Claude Code session files (`~/.claude/projects/<folder>/<session id>.jsonl`), as the CLI writes them.

Each `user` and `assistant` entry holds one Messages-API message; the blocks of one answer may come as several
entries sharing the message id, merged here. Every answer is a model call whose prompt is the conversation
before it. Sub-agent conversations (`isSidechain`) are sessions of their own. The CLI does not write its
system prompt or tool schemas to the session: rendered prompts lack them (docs/traces.md#fidelity).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from alight_server.traces.formats.content import Unrenderable, anthropic_messages, text_of
from alight_server.traces.formats.lines import json_lines
from alight_server.traces.model import Parsed, RecordError, TraceCall, TraceSession, assistant

KNOWN_MAJOR = "2."  # the session layout read here is Claude Code 2.x's (pinned in scripts/setup.sh)


def session_files(paths: Sequence[Path]) -> list[Path]:
    """The files given, and every .jsonl under a folder given (a `projects/` folder holds many sessions)."""
    return [f for p in paths for f in (sorted(p.rglob("*.jsonl")) if p.is_dir() else [p])]


def read(paths: Sequence[Path]) -> Parsed:
    parsed = Parsed()
    for path in session_files(paths):
        conversations: dict[bool, list[tuple[str, dict[str, Any]]]] = {False: [], True: []}
        session_id = path.stem
        for number, entry in json_lines(path, parsed.errors):
            if entry.get("type") not in ("user", "assistant") or not isinstance(entry.get("message"), dict):
                continue  # queue operations, attachments, summaries: not part of what the model was sent
            version = str(entry.get("version") or "")
            if version and not version.startswith(KNOWN_MAJOR):
                parsed.errors.append(
                    RecordError(f"{path.name}:{number}", f"Claude Code {version} wrote this entry; this reader knows "
                                "2.x session files: upgrade alight or import with the matching version")
                )  # fmt: skip
                continue
            session_id = str(entry.get("sessionId") or session_id)
            conversations[bool(entry.get("isSidechain"))].append((f"{path.name}:{number}", entry))
        for sidechain, entries in conversations.items():
            if entries:
                key = f"{session_id}:sidechain" if sidechain else session_id
                parsed.sessions.append(_session(key, entries))
    parsed.sessions = [s for s in parsed.sessions if s.calls]
    return parsed


def _session(key: str, entries: list[tuple[str, dict[str, Any]]]) -> TraceSession:
    history: list[dict[str, Any]] = []
    problem: str | None = None  # a message no template renders poisons every later prompt
    calls: list[TraceCall] = []
    task: Any = None
    for where, entry, message in _merged(entries):
        role = str(message.get("role") or entry["type"])
        try:
            converted = anthropic_messages(role, message.get("content"))
        except Unrenderable as exc:
            converted, problem = [], problem or f"{where}: {exc}"
        if role == "assistant" and message.get("model") != "<synthetic>":  # the CLI's own notices are no model call
            reply = converted[0] if converted else assistant(None)
            calls.append(
                TraceCall(
                    messages=list(history),
                    reply=reply,
                    model=message.get("model"),
                    flavour="messages",
                    finish_reason=message.get("stop_reason"),
                    problem=problem,
                )
            )
        if task is None and role == "user":
            try:
                task = {"prompt": text_of(message.get("content"))}
            except Unrenderable:
                task = None
        history.extend(converted)
    return TraceSession(key=key, calls=calls, task=task)


def _merged(entries: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """Entries with consecutive blocks of one answer (same message id) joined into one message."""
    out: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
    for where, entry in entries:
        message = entry["message"]
        if out and message.get("role") == "assistant" and message.get("id") and out[-1][2].get("id") == message["id"]:
            previous = out[-1][2]
            blocks = _blocks(previous.get("content")) + _blocks(message.get("content"))
            out[-1] = (out[-1][0], out[-1][1], {**previous, **message, "content": blocks})
            continue
        out.append((where, entry, message))
    return out


def _blocks(content: Any) -> list[Any]:
    if isinstance(content, list):
        return list(content)
    return [{"type": "text", "text": content}] if isinstance(content, str) else []
