"""Hermes-style tool calls: `<tool_call>{json}</tool_call>` in generated text to OpenAI `tool_calls` and back."""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

OPEN, CLOSE = "<tool_call>", "</tool_call>"
# Like vLLM's hermes parser, accept a final call the model did not close (it often stops at EOS instead).
_CALL = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL)


def parse_tool_calls(text: str) -> tuple[str | None, list[dict[str, Any]]]:
    """(content before the first call or None, OpenAI tool_calls). Malformed JSON -> (text, []): plain content."""
    if OPEN not in text:
        return text, []
    calls = []
    for body in _CALL.findall(text):
        try:
            call = json.loads(body.strip())
        except json.JSONDecodeError:
            return text, []
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            return text, []
        arguments = call.get("arguments", call.get("parameters", {}))
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        function = {"name": call["name"], "arguments": arguments}
        calls.append({"id": f"call_{uuid.uuid4().hex[:24]}", "type": "function", "function": function})
    content = text[: text.index(OPEN)].strip()
    return content or None, calls


class ToolCallStream:
    """Streams content until a tool call may be starting, then holds the rest for `finish()` to parse."""

    def __init__(self) -> None:
        self.text = ""
        self.released = 0
        self.in_call = False

    def push(self, delta: str) -> str:
        """Content safe to stream now ('' while a `<tool_call>` may be forming)."""
        self.text += delta
        if self.in_call:
            return ""
        start = self.text.find(OPEN, self.released)
        if start >= 0:
            self.in_call = True
            return self._release(start)
        # Hold back a tail that could be the beginning of "<tool_call>".
        hold = next((k for k in range(min(len(OPEN) - 1, len(self.text)), 0, -1) if self.text.endswith(OPEN[:k])), 0)
        return self._release(len(self.text) - hold)

    def finish(self) -> tuple[str, list[dict[str, Any]]]:
        """(remaining content, tool calls) once the choice has finished."""
        if not self.in_call:
            return self._release(len(self.text)), []
        _, calls = parse_tool_calls(self.text)
        if not calls:
            return self._release(len(self.text)), []  # malformed: the held text goes out as plain content
        return "", calls

    def _release(self, end: int) -> str:
        end = max(end, self.released)
        out, self.released = self.text[self.released : end], end
        return out
