"""The chat completions side of a translated flavour (messages, responses): what it asks for and reads back."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def stream_fields(body: dict[str, Any]) -> dict[str, Any]:
    """The chat fields of a streamed call (none for an unstreamed one).

    Usage is asked for because the agent's closing event reports the token counts.
    """
    return {"stream": True, "stream_options": {"include_usage": True}} if body.get("stream") else {}


def first_choice(response: dict[str, Any]) -> dict[str, Any]:
    """Choice 0 of a chat response ({} when it has none): the one a translated flavour answers with."""
    return (response.get("choices") or [{}])[0]


def first_choice_deltas(chunk: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The deltas of choice 0 in a streamed chunk; the others are recorded, not translated."""
    for choice in chunk.get("choices") or []:
        if choice.get("index", 0) == 0:
            yield choice.get("delta") or {}


def tool_call_deltas(delta: dict[str, Any]) -> Iterator[tuple[int, dict[str, Any], dict[str, Any]]]:
    """(chat tool-call index, the tool call's delta, its function's delta) for each tool call in a delta."""
    for tc in delta.get("tool_calls") or []:
        yield tc.get("index", 0), tc, tc.get("function") or {}
