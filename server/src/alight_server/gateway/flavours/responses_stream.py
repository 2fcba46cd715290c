"""Responses API streaming: chat chunks in, `response.*` events out, closing events after the record."""

from __future__ import annotations

import uuid
from typing import Any

from alight_server.gateway.flavours.base import sse
from alight_server.gateway.flavours.chat_wire import first_choice, first_choice_deltas, tool_call_deltas
from alight_server.gateway.flavours.reasoning import Piece, ThinkSplitter
from alight_server.gateway.flavours.responses_items import (
    ResponseShell,
    call_item,
    message_item,
    namespaced_tools,
    output_items,
    reasoning_item,
)


class ResponsesStream:
    """Chat chunks in, Responses events out; the closing events wait for the record."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.shell = ResponseShell(body)
        self.seq = 0
        self.msg_id = "msg_" + uuid.uuid4().hex
        self.items: list[tuple[str, str]] = []  # (kind, item id) in output order
        self.call_items: dict[int, str] = {}  # chat tool-call index -> item id
        self.text: list[str] = []
        self.args: dict[int, list[str]] = {}
        self.final: dict[str, Any] | None = None
        self.namespaced = namespaced_tools(body)
        self.splitter = ThinkSplitter()
        self.reasoning_id = "rs_" + uuid.uuid4().hex
        self.reasoning: list[str] = []

    def _event(self, kind: str, **fields: Any) -> bytes:
        data = {"type": kind, "sequence_number": self.seq, **fields}
        self.seq += 1
        return sse(data, event=kind)

    def start(self) -> list[bytes]:
        shell = self.shell.build([], "in_progress", None, None)
        return [self._event("response.created", response=shell), self._event("response.in_progress", response=shell)]

    def _open_message(self) -> list[bytes]:
        self.items.append(("message", self.msg_id))
        index = len(self.items) - 1
        return [
            self._event(
                "response.output_item.added", output_index=index, item=message_item(self.msg_id, "", "in_progress")
            ),
            self._event(
                "response.content_part.added",
                item_id=self.msg_id,
                output_index=index,
                content_index=0,
                part={"type": "output_text", "text": "", "annotations": [], "logprobs": []},
            ),
        ]

    def on_chunk(self, chunk: dict[str, Any]) -> tuple[list[bytes], list[bytes]]:
        out: list[bytes] = []
        for delta in first_choice_deltas(chunk):
            out += self._pieces(self.splitter.feed(delta))
            for k, tc, fn in tool_call_deltas(delta):
                if k not in self.call_items:
                    item_id = "fc_" + uuid.uuid4().hex
                    self.call_items[k] = item_id
                    self.items.append(("function_call", item_id))
                    call = {"id": tc.get("id"), "function": {"name": fn.get("name"), "arguments": ""}}
                    item = call_item(item_id, call, "in_progress", self.namespaced)
                    out.append(self._event("response.output_item.added", output_index=len(self.items) - 1, item=item))
                if fn.get("arguments"):
                    self.args.setdefault(k, []).append(fn["arguments"])
                    index = self.items.index(("function_call", self.call_items[k]))
                    out.append(
                        self._event(
                            "response.function_call_arguments.delta",
                            item_id=self.call_items[k],
                            output_index=index,
                            delta=fn["arguments"],
                        )
                    )
        return out, []

    def _pieces(self, pieces: list[Piece]) -> list[bytes]:
        out: list[bytes] = []
        for kind, text in pieces:
            if kind == "reasoning":
                if ("reasoning", self.reasoning_id) not in self.items:
                    self.items.append(("reasoning", self.reasoning_id))
                    item = reasoning_item(self.reasoning_id, "", "in_progress")
                    out.append(self._event("response.output_item.added", output_index=len(self.items) - 1, item=item))
                self.reasoning.append(text)
                index = self.items.index(("reasoning", self.reasoning_id))
                common = {"item_id": self.reasoning_id, "output_index": index, "content_index": 0}
                out.append(self._event("response.reasoning_text.delta", **common, delta=text))
                continue
            if not any(k == "message" for k, _ in self.items):
                out += self._open_message()
            index = next(i for i, (k, _) in enumerate(self.items) if k == "message")
            self.text.append(text)
            out.append(
                self._event(
                    "response.output_text.delta",
                    item_id=self.msg_id,
                    output_index=index,
                    content_index=0,
                    delta=text,
                    logprobs=[],
                )
            )
        return out

    def _final(self, assembled: dict[str, Any]) -> dict[str, Any]:
        if self.final is None:
            choice = first_choice(assembled)
            message = choice.get("message") or {}
            call_ids = [
                self.call_items.get(k, "fc_" + uuid.uuid4().hex) for k in range(len(message.get("tool_calls") or []))
            ]
            finish = choice.get("finish_reason")
            output = output_items(message, self.msg_id, call_ids, self.namespaced, self.reasoning_id)
            status = "incomplete" if finish == "length" else "completed"
            self.final = self.shell.build(output, status, assembled.get("usage"), finish)
        return self.final

    def finish(self, assembled: dict[str, Any]) -> list[bytes]:
        final = self._final(assembled)
        out = self._pieces(self.splitter.flush())
        by_id = {item["id"]: item for item in final["output"]}
        for index, (kind, item_id) in enumerate(self.items):
            item = by_id.get(item_id) or (message_item(item_id, "") if kind == "message" else {})
            if kind == "reasoning":
                item = by_id.get(item_id) or reasoning_item(item_id, "".join(self.reasoning))
                common = {"item_id": item_id, "output_index": index, "content_index": 0}
                out.append(self._event("response.reasoning_text.done", **common, text="".join(self.reasoning)))
            elif kind == "message":
                text = "".join(self.text)
                part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
                common = {"item_id": item_id, "output_index": index, "content_index": 0}
                out.append(self._event("response.output_text.done", **common, text=text, logprobs=[]))
                out.append(self._event("response.content_part.done", **common, part=part))
            else:
                args = item.get("arguments", "")
                out.append(
                    self._event(
                        "response.function_call_arguments.done", item_id=item_id, output_index=index, arguments=args
                    )
                )
            out.append(self._event("response.output_item.done", output_index=index, item=item))
        kind = "response.incomplete" if final["status"] == "incomplete" else "response.completed"
        out.append(self._event(kind, response=final))
        return out

    def agent_response(self, assembled: dict[str, Any]) -> dict[str, Any]:
        return self._final(assembled)
