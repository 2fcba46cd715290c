"""Claude Code session files (`~/.claude/projects/<folder>/<session id>.jsonl`), as the CLI writes them.

Each `user` and `assistant` entry holds one Messages-API message; every answer is a model call whose prompt is the
conversation before it. The CLI does not write its system prompt or tool schemas to the session: rendered prompts
lack them (docs/traces.md#fidelity).
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
    by_session: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    links: dict[str, dict[str, str | None]] = {}  # session -> uuid -> parent uuid, every entry (attachments too)
    for path in session_files(paths):
        for number, entry in json_lines(path, parsed.errors):
            session_id = str(entry.get("sessionId") or path.stem)  # a sub-agent's own file names its parent session
            if entry.get("uuid"):
                parent = entry.get("parentUuid")
                links.setdefault(session_id, {})[str(entry["uuid"])] = str(parent) if parent else None
            if entry.get("type") not in ("user", "assistant") or not isinstance(entry.get("message"), dict):
                continue  # queue operations, attachments, summaries: not part of what the model was sent
            version = str(entry.get("version") or "")
            if version and not version.startswith(KNOWN_MAJOR):
                parsed.errors.append(
                    RecordError(f"{path.name}:{number}", f"Claude Code {version} wrote this entry; this reader knows "
                                "2.x session files: upgrade alight or import with the matching version")
                )  # fmt: skip
                continue
            by_session.setdefault(session_id, []).append((f"{path.name}:{number}", entry))
    for session_id, entries in by_session.items():
        entries.sort(key=lambda item: str(item[1].get("timestamp") or ""))  # stable: file order on equal times
        session = _session(session_id, entries, _roots(links.get(session_id, {})))
        if session.calls:
            parsed.sessions.append(session)
    return parsed


def _session(key: str, entries: list[tuple[str, dict[str, Any]]], roots: dict[str, str]) -> TraceSession:
    """One session, sub-agents included (side chains, and the sub-agents' own files, which name the parent session),
    as a live attempt captures them: each conversation (the main one, each side chain, told apart by the root of its
    parentUuid chain) keeps its own history; calls in time order."""
    histories: dict[str, list[dict[str, Any]]] = {}
    problems: dict[str, str] = {}  # a message no template renders poisons every later prompt of its conversation
    calls: list[TraceCall] = []
    task: Any = None
    for where, entry, message in _merged(entries):
        conversation = roots.get(str(entry.get("uuid")), "main")
        history = histories.setdefault(conversation, [])
        role = str(message.get("role") or entry["type"])
        try:
            converted = anthropic_messages(role, message.get("content"))
        except Unrenderable as exc:
            converted = []
            problems.setdefault(conversation, f"{where}: {exc}")
        if role == "assistant" and message.get("model") != "<synthetic>":  # the CLI's own notices are no model call
            reply = converted[0] if converted else assistant(None)
            calls.append(
                TraceCall(
                    messages=list(history),
                    reply=reply,
                    model=message.get("model"),
                    flavour="messages",
                    finish_reason=message.get("stop_reason"),
                    problem=problems.get(conversation),
                )
            )
        if task is None and role == "user" and not entry.get("isSidechain"):
            try:
                task = {"prompt": text_of(message.get("content"))}
            except Unrenderable:
                task = None
        history.extend(converted)
    return TraceSession(key=key, calls=calls, task=task)


def _roots(links: dict[str, str | None]) -> dict[str, str]:
    """Each entry's uuid -> the uuid at the root of its parentUuid chain: which conversation it belongs to."""
    roots: dict[str, str] = {}
    for uuid in links:
        chain: list[str] = []
        seen: set[str] = set()
        node = uuid
        while node not in roots:
            chain.append(node)
            seen.add(node)
            up = links.get(node)
            if up is None or up not in links or up in seen:  # the root (or a cycle a hand-edited file made)
                roots[node] = node
                break
            node = up
        for item in chain:
            roots[item] = roots[node]
    return roots


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
