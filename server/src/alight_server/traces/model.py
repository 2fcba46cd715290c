"""What every trace format is read into: sessions of model calls as OpenAI chat messages, and per-record errors."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any


@dataclass
class TraceCall:
    """One model call as logged: the conversation sent (OpenAI chat messages), the tools offered, the reply.

    `prompt_token_ids` and friends are set only where the log recorded them (fidelity `exact`); otherwise the
    importer renders `messages` + `reply` with the policy's chat template (fidelity `rendered`).
    """

    messages: list[dict[str, Any]]
    reply: dict[str, Any]  # {"role": "assistant", "content": str | None, "tool_calls": [...]} as chat completions
    tools: list[dict[str, Any]] | None = None
    model: str | None = None
    request: dict[str, Any] | None = None  # the body as logged, when the log has one (else built from messages)
    response: dict[str, Any] | None = None
    prompt_token_ids: list[int] | None = None
    response_token_ids: list[int] | None = None
    response_logprobs: list[float] | None = None
    policy_version: int | None = None
    flavour: str = "chat"
    finish_reason: str | None = None
    # Why this call cannot be rendered or stored (a content block no chat template knows): the call is reported
    # and left out, the rest of its session imported.
    problem: str | None = None

    @property
    def exact(self) -> bool:
        return self.prompt_token_ids is not None and self.response_token_ids is not None


@dataclass
class TraceReward:
    value: float
    name: str | None = None
    final: bool = True
    source: str = "agent"


@dataclass
class TraceSession:
    """One conversation or session: one offline rollout."""

    key: str  # the source's own id for it (a trace id, a session id, a rollout id), unique within the import
    calls: list[TraceCall]
    task: Any = None
    group: str | None = None  # the task it belongs to, when the source or --task-key says
    rewards: list[TraceReward] = field(default_factory=list)
    source_rollout: dict[str, Any] | None = None  # alight's export: the rollout line as exported

    def digest(self, fmt: str) -> str:
        """A content hash: the same session read twice gets the same rollout id (idempotent re-import)."""
        calls = [
            {
                "messages": c.messages,
                "reply": c.reply,
                "tools": c.tools,
                "ids": [c.prompt_token_ids, c.response_token_ids],
            }
            for c in self.calls
        ]
        body = {"format": fmt, "key": self.key, "task": self.task, "calls": calls}
        return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()[:20]


@dataclass
class RecordError:
    """A record that was not imported, and why, in words a person can act on."""

    where: str  # file:line, file:span id, session id ...
    message: str

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


@dataclass
class Parsed:
    sessions: list[TraceSession] = field(default_factory=list)
    errors: list[RecordError] = field(default_factory=list)


class TraceFormatError(ValueError):
    """A whole file cannot be read in the format named (not one bad record: those are RecordErrors)."""


def json_text(value: Any) -> str:
    """`value` as JSON text, unless it is text already (what a model wrote as arguments, what a tool answered)."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def first_prompt(messages: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The task a conversation's first user message states, for a source that records none of its own."""
    first = next((m for m in messages if m.get("role") == "user"), None)
    return {"prompt": first.get("content")} if first else None


def tool_call(call_id: str | None, name: str, arguments: Any) -> dict[str, Any]:
    """A chat-completions tool call; arguments as the JSON text the model wrote."""
    function = {"name": name, "arguments": json_text(arguments)}
    return {"id": call_id or f"call_{name}", "type": "function", "function": function}


def chat_message(
    role: str, text: str, tool_calls: list[dict[str, Any]] | None = None, call_id: Any = None
) -> dict[str, Any]:
    """A chat-completions message of any role: an assistant's with its tool calls, a tool's answering `call_id`."""
    if role == "assistant":
        return assistant(text or None, tool_calls)
    if role == "tool":
        return {"role": "tool", "tool_call_id": call_id, "content": text}
    return {"role": role, "content": text}


def assistant(content: str | None, tool_calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return message
