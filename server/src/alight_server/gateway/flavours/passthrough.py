"""Chat completions and completions: forwarded as they are, minus the fields only training asked for."""

from __future__ import annotations

from typing import Any

from alight.schemas import ApiFlavour
from alight_server.gateway.errors import GatewayError
from alight_server.gateway.flavours.assemble import CompletionAssembler
from alight_server.gateway.flavours.base import ChatUpstream
from alight_server.gateway.reply import sse

DONE = b"data: [DONE]\n\n"


def _visible(obj: dict[str, Any], body: dict[str, Any], chat: bool) -> dict[str, Any]:
    """The upstream object as the agent asked for it: forced logprobs and token ids removed, model name kept."""
    wants_ids = bool(body.get("return_token_ids"))
    wants_logprobs = bool(body.get("logprobs")) if chat else body.get("logprobs") is not None
    if body.get("model"):
        obj["model"] = body["model"]
    if not wants_ids:
        obj.pop("prompt_token_ids", None)
    for choice in obj.get("choices") or []:
        if not wants_ids:
            choice.pop("token_ids", None)
            choice.pop("prompt_token_ids", None)
        if not wants_logprobs and "logprobs" in choice:
            choice["logprobs"] = None
    return obj


class PassthroughStream:
    def __init__(self, body: dict[str, Any], chat: bool) -> None:
        self.body, self.chat = body, chat

    def start(self) -> list[bytes]:
        return []

    def on_chunk(self, chunk: dict[str, Any]) -> tuple[list[bytes], list[bytes]]:
        out = [sse(_visible(chunk, self.body, self.chat))]
        choices = chunk.get("choices") or []
        # A chunk that ends a choice (or carries usage) completes what the agent
        # sees, so it waits until the call is recorded.
        final = not choices or any(c.get("finish_reason") for c in choices)
        return ([], out) if final else (out, [])

    def finish(self, assembled: dict[str, Any]) -> list[bytes]:
        return [DONE]

    def agent_response(self, assembled: dict[str, Any]) -> dict[str, Any]:
        return _visible(assembled, self.body, self.chat)


def _check_common(body: dict[str, Any]) -> None:
    n = body.get("n", 1)
    if n is not None and (not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= 128):
        raise GatewayError(400, f"`n` must be an integer from 1 to 128, got {n!r}", param="n")
    if "stream" in body and not isinstance(body["stream"], bool | None):
        raise GatewayError(400, f"`stream` must be true or false, got {body['stream']!r}", param="stream")


class ChatFlavour(ChatUpstream):
    kind = ApiFlavour.CHAT

    def to_upstream(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
            raise GatewayError(400, "`messages` must be a non-empty list of message objects", param="messages")
        if body.get("logprobs") not in (None, True, False):
            raise GatewayError(400, f"`logprobs` must be true or false, got {body['logprobs']!r}", param="logprobs")
        _check_common(body)
        return dict(body)

    def from_upstream(self, upstream: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
        return _visible(upstream, body, chat=True)

    def stream(self, body: dict[str, Any]) -> PassthroughStream:
        return PassthroughStream(body, chat=True)


class CompletionsFlavour:
    kind = ApiFlavour.COMPLETIONS
    upstream_path = "/completions"
    anthropic_errors = False

    def to_upstream(self, body: dict[str, Any]) -> dict[str, Any]:
        prompt = body.get("prompt")
        ok = (isinstance(prompt, str) and prompt) or (
            isinstance(prompt, list) and prompt and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt)
        )
        if not ok:
            raise GatewayError(
                400,
                "`prompt` must be a non-empty string or a list of token ids (one prompt per call: "
                f"the gateway records one prompt per model call), got {type(prompt).__name__}",
                param="prompt",
            )
        logprobs = body.get("logprobs")
        if logprobs is not None and (not isinstance(logprobs, int) or isinstance(logprobs, bool) or logprobs < 0):
            raise GatewayError(400, f"`logprobs` must be a non-negative integer, got {logprobs!r}", param="logprobs")
        _check_common(body)
        return dict(body)

    def from_upstream(self, upstream: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
        return _visible(upstream, body, chat=False)

    def stream(self, body: dict[str, Any]) -> PassthroughStream:
        return PassthroughStream(body, chat=False)

    def assembler(self) -> CompletionAssembler:
        return CompletionAssembler()
