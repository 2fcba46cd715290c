"""OpenAI Responses API on top of chat completions, so Responses calls also yield token ids.

This is the request's translation; the response's items are responses_items.py, its stream responses_stream.py.
"""

from __future__ import annotations

from typing import Any

from alight.schemas import ApiFlavour
from alight_server.gateway.errors import GatewayError
from alight_server.gateway.flavours.base import ChatUpstream
from alight_server.gateway.flavours.chat_wire import stream_fields
from alight_server.gateway.flavours.responses_items import namespaced_tools
from alight_server.gateway.flavours.responses_stream import ResponsesStream


def _text(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise GatewayError(400, f"{where}.content must be a string or a list of parts, got {type(content).__name__}")
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind not in ("input_text", "output_text", "text", "refusal"):
            raise GatewayError(400, f"{where}.content[{j}] has type {kind!r}; the gateway forwards text parts only")
    return "".join(str(part.get("text", part.get("refusal", ""))) for part in content)


def _messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    chat_names = {pair: name for name, pair in namespaced_tools(body).items()}
    reasoning: list[str] = []  # reasoning items waiting for the assistant turn they belong to

    def assistant(message: dict[str, Any]) -> dict[str, Any]:
        if any(reasoning):
            message["reasoning_content"] = "".join(reasoning)
        reasoning.clear()
        return message

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
            elif role == "assistant":
                messages.append(assistant({"role": role, "content": text}))
            else:
                messages.append({"role": role, "content": text})
        elif kind == "function_call":
            name = item.get("name")
            if item.get("namespace"):
                name = chat_names.get((str(item["namespace"]), str(name)), name)
            function = {"name": name, "arguments": item.get("arguments") or "{}"}
            call = {"id": item.get("call_id"), "type": "function", "function": function}
            last = messages[-1] if messages else None
            if last and last["role"] == "assistant":  # parallel calls share one assistant turn
                last.setdefault("tool_calls", []).append(call)
            else:
                messages.append(assistant({"role": "assistant", "content": None, "tool_calls": [call]}))
        elif kind == "function_call_output":
            output = item.get("output")
            text = output if isinstance(output, str) else _text(output, f"input[{i}]")
            messages.append({"role": "tool", "tool_call_id": item.get("call_id"), "content": text})
        elif kind == "reasoning":
            # The policy's own reasoning, sent back: the next assistant turn carries it for the chat
            # template (which keeps or drops it); encrypted content from another provider is dropped.
            parts = item.get("content") or []
            reasoning.append("".join(str(p.get("text", "")) for p in parts if isinstance(p, dict)))
        else:
            raise GatewayError(400, f"input[{i}] has type {kind!r}, which the gateway cannot translate", param="input")
    return messages


# Tools the provider runs itself: the policy cannot call them through chat completions, so they are
# left out of its prompt (a harness that offers them still works; the policy just never uses them).
HOSTED_TOOLS = frozenset(
    {"web_search", "web_search_preview", "file_search", "code_interpreter", "image_generation", "computer_use_preview"}
)


def _function(t: dict[str, Any], name: Any) -> dict[str, Any]:
    fn = {k: t[k] for k in ("description", "parameters", "strict") if t.get(k) is not None}
    return {"type": "function", "function": {"name": name, **fn}}


def _tools(body: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    tools = body.get("tools") or []
    if tools:
        chat_tools = []
        for i, t in enumerate(tools):
            kind = t.get("type") if isinstance(t, dict) else t
            if isinstance(t, dict) and kind == "function":
                chat_tools.append(_function(t, t.get("name")))
            elif isinstance(t, dict) and (kind == "namespace" or kind in HOSTED_TOOLS):
                continue  # namespace members are added below under their chat names
            else:
                raise GatewayError(
                    400, f"tools[{i}] has type {kind!r}; only function and namespace tools reach the policy",
                    param="tools",
                )  # fmt: skip
        members = {
            (str(g.get("name") or ""), str(m.get("name") or "")): m
            for g in tools
            if isinstance(g, dict) and g.get("type") == "namespace"
            for m in g.get("tools") or []
            if isinstance(m, dict)
        }
        for name, pair in namespaced_tools(body).items():
            chat_tools.append(_function(members[pair], name))
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


class ResponsesFlavour(ChatUpstream):
    kind = ApiFlavour.RESPONSES

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
        chat.update(stream_fields(body))
        return chat

    def from_upstream(self, upstream: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
        return ResponsesStream(body).agent_response(upstream)  # a stream that saw no chunk: fresh ids throughout

    def stream(self, body: dict[str, Any]) -> ResponsesStream:
        return ResponsesStream(body)
