"""Anthropic Messages responses from chat completions, whole or streamed."""

from __future__ import annotations

import uuid
from typing import Any

import orjson

from alight_server.gateway.flavours.chat_wire import first_choice, first_choice_deltas, tool_call_deltas
from alight_server.gateway.flavours.reasoning import Piece, ThinkSplitter, split_message
from alight_server.gateway.reply import sse

STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use", "function_call": "tool_use"}


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


def whole_message(msg_id: str, completion: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    """The Messages response to request `body` that chat `completion` (a response, or a stream's record) makes."""
    choice = first_choice(completion)
    content = _content(choice.get("message") or {})
    u = completion.get("usage") or {}
    usage = {"input_tokens": int(u.get("prompt_tokens") or 0), "output_tokens": int(u.get("completion_tokens") or 0)}
    return _message(msg_id, body, content, _stop(choice, body), usage)


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
            out.append(sse({"type": "content_block_stop", "index": len(self.blocks) - 1}, named=True))
        self.blocks.append(block["type"])
        out.append(
            sse({"type": "content_block_start", "index": len(self.blocks) - 1, "content_block": block}, named=True)
        )
        return out

    def on_chunk(self, chunk: dict[str, Any]) -> tuple[list[bytes], list[bytes]]:
        out: list[bytes] = []
        if not self.started:
            self.started = True
            usage = {"input_tokens": len(chunk.get("prompt_token_ids") or []), "output_tokens": 0}
            message = _message(self.msg_id, self.body, [], (None, None), usage)
            out.append(sse({"type": "message_start", "message": message}, named=True))
        for delta in first_choice_deltas(chunk):
            out += self._pieces(self.splitter.feed(delta))
            for k, tc, fn in tool_call_deltas(delta):
                if k not in self.tool_blocks:
                    out += self._open({"type": "tool_use", "id": tc.get("id"), "name": fn.get("name"), "input": {}})
                    self.tool_blocks[k] = len(self.blocks) - 1
                if fn.get("arguments"):
                    delta_event = {"type": "input_json_delta", "partial_json": fn["arguments"]}
                    event = {"type": "content_block_delta", "index": self.tool_blocks[k], "delta": delta_event}
                    out.append(sse(event, named=True))
        return out, []

    def _pieces(self, pieces: list[Piece]) -> list[bytes]:
        out: list[bytes] = []
        for kind, text in pieces:
            block = "thinking" if kind == "reasoning" else "text"
            if not self.blocks or self.blocks[-1] != block:
                out += self._open(_thinking_block() if block == "thinking" else {"type": "text", "text": ""})
            delta = {"type": f"{block}_delta", block: text}  # thinking_delta or text_delta
            event = {"type": "content_block_delta", "index": len(self.blocks) - 1, "delta": delta}
            out.append(sse(event, named=True))
        return out

    def finish(self, assembled: dict[str, Any]) -> list[bytes]:
        final = self.agent_response(assembled)
        out = self._pieces(self.splitter.flush())
        if self.blocks:
            out.append(sse({"type": "content_block_stop", "index": len(self.blocks) - 1}, named=True))
        delta = {"stop_reason": final["stop_reason"], "stop_sequence": final["stop_sequence"]}
        usage = {"output_tokens": final["usage"]["output_tokens"]}
        out.append(sse({"type": "message_delta", "delta": delta, "usage": usage}, named=True))
        out.append(sse({"type": "message_stop"}, named=True))
        return out

    def agent_response(self, assembled: dict[str, Any]) -> dict[str, Any]:
        return whole_message(self.msg_id, assembled, self.body)
