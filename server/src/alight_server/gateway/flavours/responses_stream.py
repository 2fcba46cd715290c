"""Responses API streaming: chat chunks in, `response.*` events out, closing events after the record."""

from __future__ import annotations

import uuid
from typing import Any

from alight_server.gateway.flavours.chat_wire import first_choice, first_choice_deltas, tool_call_deltas
from alight_server.gateway.flavours.reasoning import Piece, ThinkSplitter, split_message
from alight_server.gateway.flavours.responses_items import (
    ResponseShell,
    call_item,
    message_item,
    namespaced_tools,
    reasoning_item,
)
from alight_server.gateway.reply import sse


class ResponsesStream:
    """Chat chunks in, Responses events out; the closing events wait for the record."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.shell = ResponseShell(body)
        self.seq = 0
        self.msg_id = "msg_" + uuid.uuid4().hex
        self.items: list[tuple[str, str]] = []  # (kind, item id) in output order
        self.call_items: dict[int, str] = {}  # chat tool-call index -> item id
        self.text: list[str] = []
        self.final: dict[str, Any] | None = None
        self.namespaced = namespaced_tools(body)
        self.splitter = ThinkSplitter()
        self.reasoning_id = "rs_" + uuid.uuid4().hex
        self.reasoning: list[str] = []

    def _event(self, kind: str, **fields: Any) -> bytes:
        data = {"type": kind, "sequence_number": self.seq, **fields}
        self.seq += 1
        return sse(data, named=True)

    def start(self) -> list[bytes]:
        shell = self.shell.build([], "in_progress", None, None)
        return [self._event("response.created", response=shell), self._event("response.in_progress", response=shell)]

    def _add(self, kind: str, item: dict[str, Any]) -> bytes:
        self.items.append((kind, item["id"]))
        return self._event("response.output_item.added", output_index=len(self.items) - 1, item=item)

    def _open_message(self) -> list[bytes]:
        added = self._add("message", message_item(self.msg_id, "", "in_progress"))
        part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
        where = {"item_id": self.msg_id, "output_index": len(self.items) - 1, "content_index": 0}
        return [added, self._event("response.content_part.added", **where, part=part)]

    def on_chunk(self, chunk: dict[str, Any]) -> tuple[list[bytes], list[bytes]]:
        out: list[bytes] = []
        for delta in first_choice_deltas(chunk):
            out += self._pieces(self.splitter.feed(delta))
            for k, tc, fn in tool_call_deltas(delta):
                if k not in self.call_items:
                    item_id = "fc_" + uuid.uuid4().hex
                    self.call_items[k] = item_id
                    call = {"id": tc.get("id"), "function": {"name": fn.get("name"), "arguments": ""}}
                    out.append(self._add("function_call", call_item(item_id, call, "in_progress", self.namespaced)))
                if fn.get("arguments"):
                    at = self._at(self.call_items[k])
                    del at["content_index"]
                    out.append(self._event("response.function_call_arguments.delta", **at, delta=fn["arguments"]))
        return out, []

    def _pieces(self, pieces: list[Piece]) -> list[bytes]:
        out: list[bytes] = []
        for kind, text in pieces:
            if kind == "reasoning":
                if ("reasoning", self.reasoning_id) not in self.items:
                    out.append(self._add("reasoning", reasoning_item(self.reasoning_id, "", "in_progress")))
                self.reasoning.append(text)
                out.append(self._event("response.reasoning_text.delta", **self._at(self.reasoning_id), delta=text))
                continue
            if ("message", self.msg_id) not in self.items:
                out += self._open_message()
            self.text.append(text)
            out.append(self._event("response.output_text.delta", **self._at(self.msg_id), delta=text, logprobs=[]))
        return out

    def _at(self, item_id: str) -> dict[str, Any]:
        """Where an item's text goes: the item, its output index, content index 0."""
        index = next(i for i, (_, known) in enumerate(self.items) if known == item_id)
        return {"item_id": item_id, "output_index": index, "content_index": 0}

    def _final(self, assembled: dict[str, Any]) -> dict[str, Any]:
        if self.final is None:
            choice = first_choice(assembled)
            message = choice.get("message") or {}
            reasoning, text = split_message(message)
            output = [reasoning_item(self.reasoning_id, reasoning)] if reasoning else []
            if text:
                output.append(message_item(self.msg_id, text))
            for k, call in enumerate(message.get("tool_calls") or []):
                item_id = self.call_items.get(k) or "fc_" + uuid.uuid4().hex
                output.append(call_item(item_id, call, namespaced=self.namespaced))
            finish = choice.get("finish_reason")
            status = "incomplete" if finish == "length" else "completed"
            self.final = self.shell.build(output, status, assembled.get("usage"), finish)
        return self.final

    def finish(self, assembled: dict[str, Any]) -> list[bytes]:
        final = self._final(assembled)
        out = self._pieces(self.splitter.flush())
        by_id = {item["id"]: item for item in final["output"]}
        for index, (kind, item_id) in enumerate(self.items):
            item = by_id.get(item_id)
            at = {"item_id": item_id, "output_index": index, "content_index": 0}
            if kind == "reasoning":
                item = item or reasoning_item(item_id, "".join(self.reasoning))
                out.append(self._event("response.reasoning_text.done", **at, text="".join(self.reasoning)))
            elif kind == "message":
                item, text = item or message_item(item_id, ""), "".join(self.text)
                part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
                out.append(self._event("response.output_text.done", **at, text=text, logprobs=[]))
                out.append(self._event("response.content_part.done", **at, part=part))
            else:
                item, kind = item or {}, "response.function_call_arguments.done"
                out.append(self._event(kind, item_id=item_id, output_index=index, arguments=item.get("arguments", "")))
            out.append(self._event("response.output_item.done", output_index=index, item=item))
        kind = "response.incomplete" if final["status"] == "incomplete" else "response.completed"
        out.append(self._event(kind, response=final))
        return out

    def agent_response(self, assembled: dict[str, Any]) -> dict[str, Any]:
        return self._final(assembled)
