"""Anthropic Messages API on top of chat completions, so Anthropic-client harnesses yield token ids too.

Request: `system` becomes a system message, `text` / `tool_use` /
`tool_result` blocks become chat content, tool calls and tool messages;
tools map `input_schema` to `parameters`. Response: `text` and `tool_use`
blocks with Anthropic stop reasons. Streaming emits `message_start`,
`content_block_start/delta/stop`, `message_delta` (stop reason, usage) and
`message_stop`.
"""

from __future__ import annotations

import uuid
from typing import Any

import orjson

from alight.schemas import ApiFlavour
from alight_server.gateway.errors import GatewayError
from alight_server.gateway.flavours.base import ChatUpstream, sse
from alight_server.gateway.flavours.chat_wire import first_choice, first_choice_deltas, stream_fields, tool_call_deltas
from alight_server.gateway.flavours.reasoning import Piece, ThinkSplitter, split_message

STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use", "function_call": "tool_use"}


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
    content = block.get("content", "")
    if isinstance(content, str):
        text = content
    else:
        text = "".join(_block_text(b, f"{where}.content[{j}]") for j, b in enumerate(_blocks(content, where)))
    return f"Error: {text}" if block.get("is_error") else text


def _messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    system = body.get("system")
    if system:
        text = (
            system if isinstance(system, str) else "".join(_block_text(b, "system") for b in _blocks(system, "system"))
        )
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
        texts: list[str] = []
        thinking: list[str] = []
        calls: list[dict[str, Any]] = []
        for j, block in enumerate(_blocks(m.get("content", ""), f"messages[{i}]")):
            where = f"messages[{i}].content[{j}]"
            kind = block.get("type")
            if kind == "tool_use" and role == "assistant":
                arguments = orjson.dumps(block.get("input") or {}).decode()
                calls.append(
                    {
                        "id": block.get("id"),
                        "type": "function",
                        "function": {"name": block.get("name"), "arguments": arguments},
                    }
                )
            elif kind == "tool_result" and role == "user":
                out.append(
                    {
                        "role": "tool",
                        "tool_call_id": block.get("tool_use_id"),
                        "content": _tool_result_text(block, where),
                    }
                )
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


def _thinking_block(text: str = "") -> dict[str, Any]:
    # No signature: the policy's reasoning is not Anthropic's; clients keep and return it as it is.
    return {"type": "thinking", "thinking": text, "signature": ""}


def _content(message: dict[str, Any]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    reasoning, text = split_message(message)
    if reasoning:
        blocks.append(_thinking_block(reasoning))
    if text:
        blocks.append({"type": "text", "text": text})
    for call in message.get("tool_calls") or []:
        fn = call.get("function") or {}
        try:
            parsed = orjson.loads(fn.get("arguments") or "{}")
        except orjson.JSONDecodeError:
            parsed = {"_raw_arguments": fn.get("arguments")}  # the policy wrote invalid JSON: keep it visible
        blocks.append({"type": "tool_use", "id": call.get("id"), "name": fn.get("name"), "input": parsed})
    return blocks


def _stop(choice: dict[str, Any], body: dict[str, Any]) -> tuple[str | None, str | None]:
    finish = choice.get("finish_reason")
    stop_reason = choice.get("stop_reason")
    if finish == "stop" and isinstance(stop_reason, str) and stop_reason in (body.get("stop_sequences") or []):
        return "stop_sequence", stop_reason
    return STOP_REASONS.get(finish or "stop", "end_turn"), None


def _usage(usage: dict[str, Any] | None) -> dict[str, Any]:
    u = usage or {}
    return {"input_tokens": int(u.get("prompt_tokens") or 0), "output_tokens": int(u.get("completion_tokens") or 0)}


def _message(
    msg_id: str,
    body: dict[str, Any],
    content: list[dict[str, Any]],
    stop: tuple[str | None, str | None],
    usage: dict[str, Any],
) -> dict[str, Any]:
    return {
        "id": msg_id,
        "type": "message",
        "role": "assistant",
        "model": body.get("model") or "",
        "content": content,
        "stop_reason": stop[0],
        "stop_sequence": stop[1],
        "usage": usage,
    }


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
        choice = first_choice(upstream)
        content = _content(choice.get("message") or {})
        return _message("msg_" + uuid.uuid4().hex, body, content, _stop(choice, body), _usage(upstream.get("usage")))

    def stream(self, body: dict[str, Any]) -> MessagesStream:
        return MessagesStream(body)


class MessagesStream:
    """Chat chunks in, Anthropic stream events out; `message_delta`/`message_stop` wait for the record."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.body = body
        self.msg_id = "msg_" + uuid.uuid4().hex
        self.blocks: list[str] = []  # kind of each content block opened so far
        self.tool_blocks: dict[int, int] = {}  # chat tool-call index -> block index
        self.splitter = ThinkSplitter()
        self.started = False

    def start(self) -> list[bytes]:
        return []  # message_start needs the prompt size, known from the first chunk's token ids

    def _open(self, block: dict[str, Any]) -> list[bytes]:
        out = []
        if self.blocks:
            out.append(sse({"type": "content_block_stop", "index": len(self.blocks) - 1}, "content_block_stop"))
        self.blocks.append(block["type"])
        out.append(
            sse(
                {"type": "content_block_start", "index": len(self.blocks) - 1, "content_block": block},
                "content_block_start",
            )
        )
        return out

    def on_chunk(self, chunk: dict[str, Any]) -> tuple[list[bytes], list[bytes]]:
        out: list[bytes] = []
        if not self.started:
            self.started = True
            usage = {"input_tokens": len(chunk.get("prompt_token_ids") or []), "output_tokens": 0}
            message = _message(self.msg_id, self.body, [], (None, None), usage)
            out.append(sse({"type": "message_start", "message": message}, "message_start"))
        for delta in first_choice_deltas(chunk):
            out += self._pieces(self.splitter.feed(delta))
            for k, tc, fn in tool_call_deltas(delta):
                if k not in self.tool_blocks:
                    out += self._open({"type": "tool_use", "id": tc.get("id"), "name": fn.get("name"), "input": {}})
                    self.tool_blocks[k] = len(self.blocks) - 1
                if fn.get("arguments"):
                    delta_event = {"type": "input_json_delta", "partial_json": fn["arguments"]}
                    event = {"type": "content_block_delta", "index": self.tool_blocks[k], "delta": delta_event}
                    out.append(sse(event, "content_block_delta"))
        return out, []

    def _pieces(self, pieces: list[Piece]) -> list[bytes]:
        out: list[bytes] = []
        for kind, text in pieces:
            block = "thinking" if kind == "reasoning" else "text"
            if not self.blocks or self.blocks[-1] != block:
                out += self._open(_thinking_block() if block == "thinking" else {"type": "text", "text": ""})
            delta = (
                {"type": "thinking_delta", "thinking": text}
                if block == "thinking"
                else {"type": "text_delta", "text": text}
            )
            event = {"type": "content_block_delta", "index": len(self.blocks) - 1, "delta": delta}
            out.append(sse(event, "content_block_delta"))
        return out

    def finish(self, assembled: dict[str, Any]) -> list[bytes]:
        final = self.agent_response(assembled)
        out = self._pieces(self.splitter.flush())
        if self.blocks:
            out.append(sse({"type": "content_block_stop", "index": len(self.blocks) - 1}, "content_block_stop"))
        delta = {"stop_reason": final["stop_reason"], "stop_sequence": final["stop_sequence"]}
        out.append(
            sse(
                {"type": "message_delta", "delta": delta, "usage": {"output_tokens": final["usage"]["output_tokens"]}},
                "message_delta",
            )
        )
        out.append(sse({"type": "message_stop"}, "message_stop"))
        return out

    def agent_response(self, assembled: dict[str, Any]) -> dict[str, Any]:
        choice = first_choice(assembled)
        usage = _usage(assembled.get("usage"))
        return _message(self.msg_id, self.body, _content(choice.get("message") or {}), _stop(choice, self.body), usage)
