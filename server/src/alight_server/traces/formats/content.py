"""Content blocks of other APIs (Anthropic Messages, OpenAI Responses) as chat-completions messages."""

from __future__ import annotations

from typing import Any

from alight_server.traces.model import assistant, chat_message, tool_call


class Unrenderable(ValueError):
    """A block no chat template can show the model (an image, a server-side tool): the call is left out."""


def text_of(content: Any) -> str:
    """The text of a content field: a string, or text-bearing blocks joined; other blocks are Unrenderable."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(_block_text(block) for block in content)
    raise Unrenderable(f"content of type {type(content).__name__} is neither text nor a list of blocks")


def _block_text(block: Any) -> str:
    if isinstance(block, str):
        return block
    if isinstance(block, dict):
        kind = block.get("type")
        if kind in ("text", "input_text", "output_text") and isinstance(block.get("text"), str):
            return block["text"]
        if kind == "tool_result":
            return text_of(block.get("content"))
        raise Unrenderable(f"a {kind!r} content block has no text form the chat template can render")
    raise Unrenderable(f"content block {block!r:.60} is not an object")


def anthropic_messages(role: str, content: Any) -> list[dict[str, Any]]:
    """One Messages-API message as chat messages: tool results become `tool` messages, tool uses tool calls."""
    if isinstance(content, str):
        return [{"role": role, "content": content}]
    if not isinstance(content, list):
        raise Unrenderable(f"{role} content of type {type(content).__name__} is neither text nor blocks")
    out: list[dict[str, Any]] = []
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in content:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "tool_result":
            out.append(chat_message("tool", text_of(block.get("content")), call_id=block.get("tool_use_id")))
        elif kind == "tool_use":
            calls.append(tool_call(block.get("id"), str(block.get("name")), block.get("input") or {}))
        elif kind in ("thinking", "redacted_thinking"):
            continue  # the reasoning is not shown back to the model in later turns; docs/traces.md says so
        else:
            texts.append(_block_text(block))
    if role == "assistant":
        return [assistant("".join(texts) or None, calls)]
    if texts:
        out.append({"role": role, "content": "".join(texts)})
    return out
