"""Anthropic Messages API on top of chat completions, so Anthropic-client harnesses yield token ids too.

This is the request's translation; the response, whole or streamed, is made in messages_response.py.
"""

from __future__ import annotations

import uuid
from typing import Any

import orjson

from alight.schemas import ApiFlavour
from alight_server.gateway.errors import GatewayError
from alight_server.gateway.flavours.base import ChatUpstream
from alight_server.gateway.flavours.chat_wire import stream_fields
from alight_server.gateway.flavours.messages_response import MessagesStream, whole_message


def _blocks(content: Any, where: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list) or not all(isinstance(b, dict) for b in content):
        raise GatewayError(400, f"{where}.content must be a string or a list of content blocks")
    return content


def _block_text(block: dict[str, Any], where: str) -> str:
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    raise GatewayError(400, f"{where} is a {kind!r} block; the gateway forwards text, tool_use and tool_result only")


def _tool_result_text(block: dict[str, Any], where: str) -> str:
    blocks = _blocks(block.get("content", ""), where)  # a string is one text block
    text = "".join(_block_text(b, f"{where}.content[{j}]") for j, b in enumerate(blocks))
    return f"Error: {text}" if block.get("is_error") else text


def _messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    system = body.get("system")
    if system:
        text = "".join(_block_text(b, "system") for b in _blocks(system, "system"))  # a string is one text block
        out.append({"role": "system", "content": text})
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise GatewayError(400, "`messages` must be a non-empty list", param="messages")
    for i, m in enumerate(messages):
        role = m.get("role") if isinstance(m, dict) else None
        if role not in ("user", "assistant", "system"):
            raise GatewayError(
                400, f"messages[{i}].role must be user, assistant or system, got {role!r}", param="messages"
            )
        assert isinstance(m, dict)
        if role == "system":
            # A system turn inside the conversation (Claude Code's mid-conversation-system beta): chat
            # completions has the same role, and the policy's chat template renders it where it stands.
            blocks = _blocks(m.get("content", ""), f"messages[{i}]")
            out.append({"role": "system", "content": "".join(_block_text(b, f"messages[{i}]") for b in blocks)})
            continue
        out += _turn(m, role, i)
    return out


def _turn(m: dict[str, Any], role: str, i: int) -> list[dict[str, Any]]:
    """Message `i`, a user or assistant turn, as chat messages: a user's tool results, each a tool message,
    then its text; an assistant's text, tool calls and reasoning as one message."""
    out: list[dict[str, Any]] = []
    texts: list[str] = []
    thinking: list[str] = []
    calls: list[dict[str, Any]] = []
    for j, block in enumerate(_blocks(m.get("content", ""), f"messages[{i}]")):
        where = f"messages[{i}].content[{j}]"
        kind = block.get("type")
        if kind == "tool_use" and role == "assistant":
            function = {"name": block.get("name"), "arguments": orjson.dumps(block.get("input") or {}).decode()}
            calls.append({"id": block.get("id"), "type": "function", "function": function})
        elif kind == "tool_result" and role == "user":
            text = _tool_result_text(block, where)
            out.append({"role": "tool", "tool_call_id": block.get("tool_use_id"), "content": text})
        elif kind == "thinking":
            thinking.append(str(block.get("thinking", "")))  # back to the policy's template as reasoning
        elif kind == "redacted_thinking":
            continue  # encrypted by another provider: nothing the policy wrote
        else:
            texts.append(_block_text(block, where))
    if role == "assistant":
        msg: dict[str, Any] = {"role": "assistant", "content": "".join(texts) or None}
        if calls:
            msg["tool_calls"] = calls
        if thinking:
            msg["reasoning_content"] = "".join(thinking)
        out.append(msg)
    elif texts:
        out.append({"role": "user", "content": "".join(texts)})
    return out


def _tools(body: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    tools = body.get("tools") or []
    if tools:
        chat_tools = []
        for i, t in enumerate(tools):
            if not isinstance(t, dict) or "input_schema" not in t:
                raise GatewayError(
                    400, f"tools[{i}] is not a custom tool with an input_schema; only those reach the policy"
                )
            fn = {"name": t.get("name"), "parameters": t["input_schema"]}
            if t.get("description"):
                fn["description"] = t["description"]
            chat_tools.append({"type": "function", "function": fn})
        out["tools"] = chat_tools
    choice = body.get("tool_choice") or {}
    kind = choice.get("type") if isinstance(choice, dict) else None
    if kind == "any":
        out["tool_choice"] = "required"
    elif kind == "tool":
        out["tool_choice"] = {"type": "function", "function": {"name": choice.get("name")}}
    elif kind in ("auto", "none"):
        out["tool_choice"] = kind
    if isinstance(choice, dict) and choice.get("disable_parallel_tool_use") and tools:
        out["parallel_tool_calls"] = False
    return out


class MessagesFlavour(ChatUpstream):
    kind = ApiFlavour.MESSAGES
    anthropic_errors = True

    def to_upstream(self, body: dict[str, Any]) -> dict[str, Any]:
        max_tokens = body.get("max_tokens")
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
            raise GatewayError(400, f"`max_tokens` must be a positive integer, got {max_tokens!r}", param="max_tokens")
        chat: dict[str, Any] = {
            "model": body.get("model"),
            "messages": _messages(body),
            "max_tokens": max_tokens,
            **_tools(body),
        }
        for key in ("temperature", "top_p", "top_k"):
            if body.get(key) is not None:
                chat[key] = body[key]
        if body.get("stop_sequences"):
            chat["stop"] = list(body["stop_sequences"])
        chat.update(stream_fields(body))
        return chat

    def from_upstream(self, upstream: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
        return whole_message("msg_" + uuid.uuid4().hex, upstream, body)

    def stream(self, body: dict[str, Any]) -> MessagesStream:
        return MessagesStream(body)
