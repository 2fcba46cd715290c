"""Prefix breaks: why a model call's prompt does not continue the row before it.

When a call's prompt ids do not start with the ids of any open row, the sample builder starts a new row and asks
`classify_break` why, comparing the call with the row it shares the longest token prefix with. The causes, in the
order they are checked, and the fallback without `decode` or a message list: docs/samples.md, "Break causes".
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from alight.schemas import ApiFlavour, ModelCall

BreakCause = Literal["retokenization", "template_drift", "history_rewrite", "unknown"]
Classification = BreakCause | Literal["new_conversation"]
Decode = Callable[[Sequence[int]], str]

# A message reduced to what the model sees: (role, text). Tool calls and tool
# call ids are folded into the text so a changed argument is a changed message.
Message = tuple[str, str]

_EXAMPLE_WINDOW = 8  # ids shown either side of the divergence in a break example


@dataclass(frozen=True)
class BreakExample:
    """One prefix break, small enough to print: where the ids diverged and how."""

    rollout_id: str
    attempt: int
    call_seq: int  # the call that could not continue its row
    previous_call_seq: int  # the last call of the row it was compared with
    cause: BreakCause
    position: int  # first index where the row's ids and the new prompt's ids differ
    row_ids: list[int]  # row ids from `position`, a few of them
    prompt_ids: list[int]  # prompt ids from `position`, a few of them


def common_prefix_length(a: np.ndarray, b: np.ndarray) -> int:
    """Length of the longest common prefix of two 1-D id arrays (vectorised)."""
    n = min(len(a), len(b))
    diff = np.flatnonzero(a[:n] != b[:n])
    return int(diff[0]) if len(diff) else n


def make_example(
    call: ModelCall, previous: ModelCall, cause: BreakCause, row_ids: np.ndarray, prompt_ids: np.ndarray
) -> BreakExample:
    position = common_prefix_length(row_ids, prompt_ids)
    return BreakExample(
        rollout_id=call.rollout_id,
        attempt=call.attempt,
        call_seq=call.seq,
        previous_call_seq=previous.seq,
        cause=cause,
        position=position,
        row_ids=row_ids[position : position + _EXAMPLE_WINDOW].tolist(),
        prompt_ids=prompt_ids[position : position + _EXAMPLE_WINDOW].tolist(),
    )


def classify_break(
    call: ModelCall, previous: ModelCall, row_ids: np.ndarray, prompt_ids: np.ndarray, decode: Decode | None = None
) -> Classification:
    """Why `call` (prompt `prompt_ids`) does not continue the row ending with `previous` (ids `row_ids`)."""
    if decode is not None and decode(prompt_ids.tolist()).startswith(decode(row_ids.tolist())):
        return "retokenization"
    previous_text, text = _completion_text(previous), _prompt_text(call)
    if previous_text is not None and text is not None and text.startswith(previous_text):
        return "retokenization"
    previous_messages, messages = conversation(previous), conversation(call)
    if previous_messages is not None and messages is not None:
        extended = previous_messages + reply(previous)
        if messages[: len(extended)] == extended:
            return "template_drift"
        pairs = zip(messages, previous_messages, strict=False)
        shared = next((i for i, (a, b) in enumerate(pairs) if a != b), min(len(messages), len(previous_messages)))
        return "history_rewrite" if any(role != "system" for role, _ in messages[:shared]) else "new_conversation"
    previous_prompt = _prompt_text(previous)
    if previous_prompt is not None and text is not None:
        pairs = zip(previous_prompt, text, strict=False)
        shared = next((i for i, (a, b) in enumerate(pairs) if a != b), min(len(previous_prompt), len(text)))
        return "history_rewrite" if shared * 2 >= len(previous_prompt) else "new_conversation"
    return "unknown"


def _prompt_text(call: ModelCall) -> str | None:
    prompt = call.request.get("prompt") if call.flavour == ApiFlavour.COMPLETIONS else None
    return prompt if isinstance(prompt, str) else None


def _completion_text(call: ModelCall) -> str | None:
    """Previous prompt + its completion, as the next completions prompt would repeat it."""
    prompt = _prompt_text(call)
    if prompt is None or not call.response:
        return None
    completion = (call.response.get("choices") or [{}])[0].get("text")
    return prompt + completion if isinstance(completion, str) else None


def conversation(call: ModelCall) -> list[Message] | None:
    """The call's input messages, normalised; None when there are none to compare (or no message list)."""
    chat = call.flavour in (ApiFlavour.CHAT, ApiFlavour.MESSAGES)
    if not chat and call.flavour != ApiFlavour.RESPONSES:
        return None
    # The messages flavour keeps the system prompt apart; the responses flavour calls it instructions.
    system = call.request.get("system" if chat else "instructions")
    raw = call.request.get("messages" if chat else "input")
    messages: list[Message] = [("system", _text(system))] if system else []
    if isinstance(raw, str) and not chat:
        messages.append(("user", raw))
    elif isinstance(raw, list):
        messages.extend(_message(m) for m in raw if isinstance(m, dict))
    return messages or None


def reply(call: ModelCall) -> list[Message]:
    """The messages the call's answer adds to the conversation, as the agent would send them back."""
    response = call.response or {}
    if call.flavour == ApiFlavour.CHAT:
        choices = response.get("choices") or []
        message = choices[0].get("message") if choices else None
        return [_message(message)] if isinstance(message, dict) else []
    if call.flavour == ApiFlavour.MESSAGES:
        return [_message({"role": "assistant", "content": response.get("content")})]
    if call.flavour == ApiFlavour.RESPONSES:
        return [_message(item) for item in response.get("output") or [] if isinstance(item, dict)]
    return []


def _message(raw: dict[str, Any]) -> Message:
    kind = raw.get("type")
    if kind == "function_call":  # responses flavour: a tool call is an item of its own
        return ("assistant", f"<tool {raw.get('name')} {raw.get('arguments')}>")
    if kind == "function_call_output":
        return ("tool", _text(raw.get("output")))
    parts = [_text(raw.get("content"))]
    for tool_call in raw.get("tool_calls") or []:
        function = tool_call.get("function") or {}
        parts.append(f"<tool {function.get('name')} {function.get('arguments')}>")
    if raw.get("tool_call_id"):
        parts.append(f"<result {raw['tool_call_id']}>")
    return (str(raw.get("role", "assistant")), "".join(parts))


def _text(content: Any) -> str:
    """Text of a content field: a string, or a list of parts/blocks (text, tool use, tool result)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(_part_text(part) for part in content)
    return json.dumps(content, sort_keys=True)


def _part_text(part: Any) -> str:
    if not isinstance(part, dict):
        return str(part)
    kind = part.get("type")
    if isinstance(part.get("text"), str):
        return part["text"]
    if kind == "tool_use":
        return f"<tool {part.get('name')} {json.dumps(part.get('input'), sort_keys=True)}>"
    if kind == "tool_result":
        return _text(part.get("content"))
    return json.dumps(part, sort_keys=True)
