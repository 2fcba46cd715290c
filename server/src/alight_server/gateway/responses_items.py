"""Responses API objects: the `response` shell, output items and usage, built from chat results."""

from __future__ import annotations

import time
import uuid
from typing import Any


def usage_of(usage: dict[str, Any] | None) -> dict[str, Any]:
    u = usage or {}
    inp, out = int(u.get("prompt_tokens") or 0), int(u.get("completion_tokens") or 0)
    return {
        "input_tokens": inp,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": out,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": inp + out,
    }


def message_item(item_id: str, text: str, status: str = "completed") -> dict[str, Any]:
    content = (
        [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}] if status == "completed" else []
    )
    return {"type": "message", "id": item_id, "status": status, "role": "assistant", "content": content}


def call_item(item_id: str, call: dict[str, Any], status: str = "completed") -> dict[str, Any]:
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
            "usage": usage_of(usage) if usage is not None else None,
        }


def output_items(message: dict[str, Any], msg_id: str, call_ids: list[str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if message.get("content"):
        out.append(message_item(msg_id, message["content"]))
    for call, item_id in zip(message.get("tool_calls") or [], call_ids, strict=False):
        out.append(call_item(item_id, call))
    return out
