"""alight's own export (`alight data export`, docs/data.md#export-format): read back exactly.

Calls keep their recorded ids, logprobs, flavour, bodies and policy versions; rollouts keep their task, mode,
group and rewards. Only the latest attempt of each rollout is imported (the one the export's rows come from).
A redacted export has no token ids: its calls are rendered from the redacted text, and say so.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from alight_server.traces.formats.lines import json_lines
from alight_server.traces.model import Parsed, RecordError, TraceCall, TraceReward, TraceSession, assistant

FORMAT, VERSIONS = "alight-export", (1,)


def read(paths: Sequence[Path]) -> Parsed:
    parsed = Parsed()
    for path in paths:
        lines = json_lines(path, parsed.errors)
        first = next(lines, None)
        if first is None:
            parsed.errors.append(RecordError(path.name, "empty file: no alight-export header line"))
            continue
        _, header = first
        if header.get("format") != FORMAT:
            parsed.errors.append(
                RecordError(f"{path.name}:1", f"not an alight export (format {header.get('format')!r})")
            )
            continue
        if header.get("version") not in VERSIONS:
            parsed.errors.append(
                RecordError(f"{path.name}:1", f"alight-export version {header.get('version')!r} is unknown here (this "
                            f"alight reads {list(VERSIONS)}): import it with the alight that wrote it, or upgrade")
            )  # fmt: skip
            continue
        rollouts: dict[str, TraceSession] = {}
        calls: dict[str, list[tuple[int, int, TraceCall]]] = {}
        for number, line in lines:
            kind = line.get("kind")
            try:
                if kind == "rollout":
                    rollouts[str(line["rollout_id"])] = _session(line)
                elif kind == "call":
                    calls.setdefault(str(line["rollout_id"]), []).append(
                        (int(line["attempt"]), int(line["seq"]), _call(line, bool(header.get("redacted"))))
                    )
            except (KeyError, TypeError, ValueError) as exc:
                parsed.errors.append(RecordError(f"{path.name}:{number}", f"bad {kind} line: {exc!r}"))
        for rollout_id, session in rollouts.items():
            found = calls.get(rollout_id, [])
            latest = max((attempt for attempt, _, _ in found), default=None)
            session.calls = [call for attempt, _, call in sorted(found, key=lambda c: c[:2]) if attempt == latest]
            parsed.sessions.append(session)
    return parsed


def _session(line: dict[str, Any]) -> TraceSession:
    rewards = [
        TraceReward(float(r["value"]), r.get("name"), bool(r.get("final", True)), str(r.get("source") or "agent"))
        for r in line.get("rewards") or []
    ]
    return TraceSession(
        key=str(line["rollout_id"]), calls=[], task=line.get("task"), group=line.get("group_id"), rewards=rewards,
        source_rollout=line,
    )  # fmt: skip


def _call(line: dict[str, Any], redacted: bool) -> TraceCall:
    request, response = line.get("request") or {}, line.get("response") or {}
    exact = line.get("fidelity", "exact") == "exact" and "prompt_token_ids" in line and not redacted
    raw = request.get("messages")
    messages: list[dict[str, Any]] = [m for m in raw if isinstance(m, dict)] if isinstance(raw, list) else []
    return TraceCall(
        messages=messages,
        reply=_reply(response),
        tools=request.get("tools") or None,
        model=request.get("model"),
        request=request,
        response=response,
        prompt_token_ids=list(line["prompt_token_ids"]) if exact else None,
        response_token_ids=list(line["response_token_ids"]) if exact else None,
        response_logprobs=[float(x) for x in line.get("response_logprobs") or []] if exact else None,
        policy_version=line.get("policy_version"),
        flavour=str(line.get("flavour") or "chat"),
    )


def _reply(response: dict[str, Any]) -> dict[str, Any]:
    choices = response.get("choices") or [{}]
    message = choices[0].get("message") if isinstance(choices[0], dict) else None
    return message if isinstance(message, dict) else assistant(None)
