"""A model call's answer as text, tool calls and finish reason, read from whichever API flavour recorded it.

The gateway stores each response in the shape its agent got (chat completions, completions, Responses,
Anthropic Messages): code that scores answers reads them here rather than with four parsers of its own.
"""

from __future__ import annotations

from typing import Any

from alight.schemas import ApiFlavour, CallOutput, ModelCall, ToolCallView

# Anthropic stop reasons and Responses statuses, in the chat completions words CallOutput uses.
_ANTHROPIC_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls"}
_INCOMPLETE_FINISH = {"max_output_tokens": "length", "content_filter": "content_filter"}


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _text(content: Any) -> str:
    """Message content as text: a string, or the text of its parts."""
    if isinstance(content, str):
        return content
    return "".join(str(p.get("text", "")) for p in _dicts(content) if p.get("type") in ("text", "output_text"))


def _chat(response: dict[str, Any]) -> CallOutput:
    choice = next(iter(_dicts(response.get("choices"))), {})
    message: dict[str, Any] = choice["message"] if isinstance(choice.get("message"), dict) else {}
    tools = [
        ToolCallView(id=t.get("id"), name=str(t["function"].get("name", "")), arguments=t["function"].get("arguments"))
        for t in _dicts(message.get("tool_calls"))
        if isinstance(t.get("function"), dict)
    ]
    return CallOutput(text=_text(message.get("content")), tool_calls=tools, finish_reason=choice.get("finish_reason"))


def _completions(response: dict[str, Any]) -> CallOutput:
    choice = next(iter(_dicts(response.get("choices"))), {})
    return CallOutput(text=str(choice.get("text") or ""), finish_reason=choice.get("finish_reason"))


def _responses(response: dict[str, Any]) -> CallOutput:
    items = _dicts(response.get("output"))
    text = "".join(_text(i.get("content")) for i in items if i.get("type") == "message")
    tools = [
        ToolCallView(id=i.get("call_id"), name=str(i.get("name", "")), arguments=i.get("arguments"))
        for i in items
        if i.get("type") == "function_call"
    ]
    if response.get("status") == "incomplete":
        details = response.get("incomplete_details")
        reason = str(details.get("reason")) if isinstance(details, dict) else ""
        finish = _INCOMPLETE_FINISH.get(reason, "length")
    elif response.get("status") == "completed":
        finish = "tool_calls" if tools else "stop"
    else:
        finish = None
    return CallOutput(text=text, tool_calls=tools, finish_reason=finish)


def _messages(response: dict[str, Any]) -> CallOutput:
    blocks = _dicts(response.get("content"))
    tools = [
        ToolCallView(id=b.get("id"), name=str(b.get("name", "")), arguments=b.get("input"))
        for b in blocks
        if b.get("type") == "tool_use"
    ]
    stop = response.get("stop_reason")
    finish = _ANTHROPIC_FINISH.get(stop, stop) if isinstance(stop, str) else None
    return CallOutput(text=_text(blocks), tool_calls=tools, finish_reason=finish)


_READERS = {
    ApiFlavour.CHAT: _chat,
    ApiFlavour.COMPLETIONS: _completions,
    ApiFlavour.RESPONSES: _responses,
    ApiFlavour.MESSAGES: _messages,
}


def call_output(call: ModelCall) -> CallOutput:
    """The call's answer in one shape; empty for a call with no (or no readable) response."""
    if not isinstance(call.response, dict):
        return CallOutput()
    return _READERS[call.flavour](call.response)
