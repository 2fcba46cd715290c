"""OpenAI Responses API on top of chat completions, so Responses calls also yield token ids.

Request: `instructions` and `input` items (messages, `function_call`,
`function_call_output`) become chat messages; function tools and
`tool_choice` map one to one; `text.format` becomes `response_format`.
Response: text becomes a `message` item, tool calls `function_call` items.
Streaming emits the Responses event sequence (`response.created` ...
`response.completed`), each event with its `sequence_number`.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from alight.schemas import ApiFlavour
from alight_server.gateway.assemble import ChatAssembler
from alight_server.gateway.errors import GatewayError
from alight_server.gateway.flavour import sse


def _text(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise GatewayError(400, f"{where}.content must be a string or a list of parts, got {type(content).__name__}")
    out = []
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind not in ("input_text", "output_text", "text", "refusal"):
            raise GatewayError(400, f"{where}.content[{j}] has type {kind!r}; the gateway forwards text parts only")
        out.append(str(part.get("text", part.get("refusal", ""))))
    return "".join(out)


def _messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    if body.get("instructions"):
        messages.append({"role": "system", "content": str(body["instructions"])})
    items = body.get("input")
    if isinstance(items, str):
        return [*messages, {"role": "user", "content": items}]
    if not isinstance(items, list) or not items:
        raise GatewayError(400, "`input` must be a string or a non-empty list of items", param="input")
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise GatewayError(400, f"input[{i}] must be an object, got {type(item).__name__}", param="input")
        kind = item.get("type", "message")
        if kind == "message":
            role = {"developer": "system"}.get(item.get("role", ""), item.get("role"))
            if role not in ("system", "user", "assistant"):
                raise GatewayError(400, f"input[{i}].role must be user, assistant, system or developer, got {role!r}")
            text = _text(item.get("content", ""), f"input[{i}]")
            last = messages[-1] if messages else None
            if role == "assistant" and last and last["role"] == "assistant" and last.get("tool_calls"):
                last["content"] = (last.get("content") or "") + text
            else:
                messages.append({"role": role, "content": text})
        elif kind == "function_call":
            call = {
                "id": item.get("call_id"),
                "type": "function",
                "function": {"name": item.get("name"), "arguments": item.get("arguments") or "{}"},
            }
            last = messages[-1] if messages else None
            if last and last["role"] == "assistant":  # parallel calls share one assistant turn
                last.setdefault("tool_calls", []).append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            output = item.get("output")
            text = output if isinstance(output, str) else _text(output, f"input[{i}]")
            messages.append({"role": "tool", "tool_call_id": item.get("call_id"), "content": text})
        elif kind == "reasoning":
            continue  # reasoning summaries are not part of the prompt the policy sees
        else:
            raise GatewayError(400, f"input[{i}] has type {kind!r}, which the gateway cannot translate", param="input")
    return messages


def _tools(body: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    tools = body.get("tools") or []
    if tools:
        chat_tools = []
        for i, t in enumerate(tools):
            if not isinstance(t, dict) or t.get("type") != "function":
                kind = t.get("type") if isinstance(t, dict) else t
                raise GatewayError(
                    400, f"tools[{i}] has type {kind!r}; only function tools reach the policy", param="tools"
                )
            fn = {k: t[k] for k in ("name", "description", "parameters", "strict") if t.get(k) is not None}
            chat_tools.append({"type": "function", "function": fn})
        out["tools"] = chat_tools
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        out["tool_choice"] = {"type": "function", "function": {"name": choice.get("name")}}
    elif choice is not None:
        out["tool_choice"] = choice
    if body.get("parallel_tool_calls") is not None and tools:
        out["parallel_tool_calls"] = body["parallel_tool_calls"]
    return out


def _format(body: dict[str, Any]) -> dict[str, Any] | None:
    fmt = ((body.get("text") or {}).get("format")) or {}
    if fmt.get("type") == "json_schema":
        schema = {k: fmt[k] for k in ("name", "schema", "strict", "description") if k in fmt}
        return {"type": "json_schema", "json_schema": schema}
    if fmt.get("type") == "json_object":
        return {"type": "json_object"}
    return None


def _usage(usage: dict[str, Any] | None) -> dict[str, Any]:
    u = usage or {}
    inp, out = int(u.get("prompt_tokens") or 0), int(u.get("completion_tokens") or 0)
    return {
        "input_tokens": inp,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": out,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": inp + out,
    }


def _message_item(item_id: str, text: str, status: str = "completed") -> dict[str, Any]:
    content = (
        [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}] if status == "completed" else []
    )
    return {"type": "message", "id": item_id, "status": status, "role": "assistant", "content": content}


def _call_item(item_id: str, call: dict[str, Any], status: str = "completed") -> dict[str, Any]:
    fn = call.get("function") or {}
    args = fn.get("arguments", "") if status == "completed" else ""
    return {
        "type": "function_call",
        "id": item_id,
        "call_id": call.get("id"),
        "name": fn.get("name"),
        "arguments": args,
        "status": status,
    }


class ResponseShell:
    """The parts of a Responses `response` object that echo the request."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.body = body
        self.id = "resp_" + uuid.uuid4().hex
        self.created_at = int(time.time())

    def build(
        self, output: list[dict[str, Any]], status: str, usage: dict[str, Any] | None, finish: str | None
    ) -> dict[str, Any]:
        b = self.body
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "model": b.get("model") or "",
            "output": output,
            "parallel_tool_calls": b.get("parallel_tool_calls", True),
            "tool_choice": b.get("tool_choice", "auto"),
            "tools": b.get("tools") or [],
            "temperature": b.get("temperature"),
            "top_p": b.get("top_p"),
            "instructions": b.get("instructions"),
            "max_output_tokens": b.get("max_output_tokens"),
            "previous_response_id": None,
            "error": None,
            "incomplete_details": {"reason": "max_output_tokens"} if finish == "length" else None,
            "metadata": b.get("metadata") or {},
            "text": b.get("text") or {"format": {"type": "text"}},
            "truncation": b.get("truncation", "disabled"),
            "usage": _usage(usage) if usage is not None else None,
        }


def _output(message: dict[str, Any], msg_id: str, call_ids: list[str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if message.get("content"):
        out.append(_message_item(msg_id, message["content"]))
    for call, item_id in zip(message.get("tool_calls") or [], call_ids, strict=False):
        out.append(_call_item(item_id, call))
    return out


class ResponsesFlavour:
    kind = ApiFlavour.RESPONSES
    upstream_path = "/chat/completions"
    anthropic_errors = False

    def to_upstream(self, body: dict[str, Any]) -> dict[str, Any]:
        if body.get("previous_response_id"):
            raise GatewayError(
                400,
                "previous_response_id is not supported: the gateway keeps no conversation state; "
                "send the whole conversation in `input`",
                param="previous_response_id",
            )
        chat: dict[str, Any] = {"model": body.get("model"), "messages": _messages(body), **_tools(body)}
        for src, dst in (("max_output_tokens", "max_tokens"), ("top_p", "top_p"), ("temperature", "temperature")):
            if body.get(src) is not None:
                chat[dst] = body[src]
        if (fmt := _format(body)) is not None:
            chat["response_format"] = fmt
        if body.get("stream"):
            chat["stream"] = True
            chat["stream_options"] = {"include_usage": True}
        return chat

    def from_upstream(self, upstream: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
        choice = (upstream.get("choices") or [{}])[0]
        message = choice.get("message") or {}
        calls = message.get("tool_calls") or []
        shell = ResponseShell(body)
        output = _output(message, "msg_" + uuid.uuid4().hex, ["fc_" + uuid.uuid4().hex for _ in calls])
        finish = choice.get("finish_reason")
        status = "incomplete" if finish == "length" else "completed"
        return shell.build(output, status, upstream.get("usage"), finish)

    def stream(self, body: dict[str, Any]) -> ResponsesStream:
        return ResponsesStream(body)

    def assembler(self) -> ChatAssembler:
        return ChatAssembler()


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
                "response.output_item.added", output_index=index, item=_message_item(self.msg_id, "", "in_progress")
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
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            if delta.get("content"):
                if not any(kind == "message" for kind, _ in self.items):
                    out += self._open_message()
                index = next(i for i, (kind, _) in enumerate(self.items) if kind == "message")
                self.text.append(delta["content"])
                out.append(
                    self._event(
                        "response.output_text.delta",
                        item_id=self.msg_id,
                        output_index=index,
                        content_index=0,
                        delta=delta["content"],
                        logprobs=[],
                    )
                )
            for tc in delta.get("tool_calls") or []:
                k = tc.get("index", 0)
                fn = tc.get("function") or {}
                if k not in self.call_items:
                    item_id = "fc_" + uuid.uuid4().hex
                    self.call_items[k] = item_id
                    self.items.append(("function_call", item_id))
                    call = {"id": tc.get("id"), "function": {"name": fn.get("name"), "arguments": ""}}
                    item = _call_item(item_id, call, "in_progress")
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

    def _final(self, assembled: dict[str, Any]) -> dict[str, Any]:
        if self.final is None:
            choice = (assembled.get("choices") or [{}])[0]
            message = choice.get("message") or {}
            call_ids = [
                self.call_items.get(k, "fc_" + uuid.uuid4().hex) for k in range(len(message.get("tool_calls") or []))
            ]
            finish = choice.get("finish_reason")
            output = _output(message, self.msg_id, call_ids)
            status = "incomplete" if finish == "length" else "completed"
            self.final = self.shell.build(output, status, assembled.get("usage"), finish)
        return self.final

    def finish(self, assembled: dict[str, Any]) -> list[bytes]:
        final = self._final(assembled)
        by_id = {item["id"]: item for item in final["output"]}
        out: list[bytes] = []
        for index, (kind, item_id) in enumerate(self.items):
            item = by_id.get(item_id) or (_message_item(item_id, "") if kind == "message" else {})
            if kind == "message":
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
