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
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": out,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": inp + out,
    }


def reasoning_item(item_id: str, text: str, status: str = "completed") -> dict[str, Any]:
    """The policy's reasoning as a Responses `reasoning` item (readable text, not encrypted content)."""
    content = [{"type": "reasoning_text", "text": text}] if status == "completed" else []
    return {"type": "reasoning", "id": item_id, "status": status, "summary": [], "content": content}


def message_item(item_id: str, text: str, status: str = "completed") -> dict[str, Any]:
    content = (
        [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}] if status == "completed" else []
    )
    return {"type": "message", "id": item_id, "status": status, "role": "assistant", "content": content}


Namespaced = dict[str, tuple[str, str]]  # chat tool name -> (namespace, the tool's name inside it)


def namespaced_tools(body: dict[str, Any]) -> Namespaced:
    """The chat names given to the function tools inside `namespace` tools (Codex groups tools this way).

    A tool keeps its own name unless another tool has it already; then it becomes `namespace__name`.
    """
    tools = [t for t in body.get("tools") or [] if isinstance(t, dict)]
    taken = {t.get("name") for t in tools if t.get("type") == "function"}
    out: Namespaced = {}
    for group in tools:
        if group.get("type") != "namespace" or not isinstance(group.get("tools"), list):
            continue
        namespace = str(group.get("name") or "")
        for tool in group["tools"]:
            if not isinstance(tool, dict) or tool.get("type") != "function":
                continue
            inner = str(tool.get("name") or "")
            name = inner if inner not in taken else f"{namespace}__{inner}"
            taken.add(name)
            out[name] = (namespace, inner)
    return out


def call_item(
    item_id: str, call: dict[str, Any], status: str = "completed", namespaced: Namespaced | None = None
) -> dict[str, Any]:
    fn = call.get("function") or {}
    args = fn.get("arguments", "") if status == "completed" else ""
    item = {
        "type": "function_call",
        "id": item_id,
        "call_id": call.get("id"),
        "name": fn.get("name"),
        "arguments": args,
        "status": status,
    }
    if namespaced and fn.get("name") in namespaced:
        item["namespace"], item["name"] = namespaced[fn["name"]]
    return item


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
