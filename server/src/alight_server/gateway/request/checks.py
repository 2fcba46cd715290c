"""What every upstream refuses, refused at the gateway with the 400 an OpenAI or Anthropic client expects.

Checked on the chat/completions body the gateway sends upstream (after translating responses and
messages calls), before anything is forwarded: a wrong type here reached vLLM as a 400 at best and,
on a less careful upstream, as a 500 the agent saw as a 502.
"""

from __future__ import annotations

from typing import Any

from alight_server.gateway.errors import GatewayError

INT64 = 2**63
# Fields that must be whole numbers of at least this value (or null) on every upstream.
MINIMUM = {"max_tokens": 1, "max_completion_tokens": 1, "n": 1}


def _refuse(param: str, message: str) -> GatewayError:
    return GatewayError(400, message, param=param)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_upstream_body(body: dict[str, Any]) -> None:
    """GatewayError(400, naming the field) for a body no upstream would take."""
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise _refuse("model", f"model must be a string, got {type(model).__name__}")
    for field, least in MINIMUM.items():
        value = body.get(field)
        if value is not None and (not _is_int(value) or not least <= value < INT64):
            raise _refuse(field, f"{field} must be an integer of at least {least}, got {value!r:.60}")
    seed = body.get("seed")
    if seed is not None and (not _is_int(seed) or not -INT64 <= seed < INT64):
        raise _refuse("seed", f"seed must be a 64-bit integer, got {seed!r:.60}")
    tools = body.get("tools")
    if tools is not None and not (isinstance(tools, list) and all(isinstance(t, dict) for t in tools)):
        raise _refuse("tools", "tools must be a list of tool objects")
    stop = body.get("stop")
    if stop is not None and not (
        isinstance(stop, str) or (isinstance(stop, list) and all(isinstance(x, str) for x in stop))
    ):
        raise _refuse("stop", "stop must be a string or a list of strings")
    if "messages" in body:
        _check_messages(body["messages"])
    elif "prompt" in body and not isinstance(body["prompt"], str | list):
        raise _refuse("prompt", f"prompt must be a string or a list, got {type(body['prompt']).__name__}")


def _check_messages(messages: Any) -> None:
    if not isinstance(messages, list) or not messages:
        raise _refuse("messages", "messages must be a non-empty list of message objects")
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            raise _refuse(where, f"{where} must be an object with a role, got {type(message).__name__}")
        role = message.get("role")
        if not isinstance(role, str):
            raise _refuse(f"{where}.role", f"{where} has no role; every message needs one (user, assistant, ...)")
        content = message.get("content")
        # Only an assistant turn that calls tools may leave its content null (or out).
        if content is None and not (role == "assistant" and message.get("tool_calls")):
            raise _refuse(
                f"{where}.content", f"{where}.content is null; only an assistant turn with tool_calls may omit it"
            )
        if content is not None and not isinstance(content, str | list):
            raise _refuse(f"{where}.content", f"{where}.content must be a string or a list of parts")
