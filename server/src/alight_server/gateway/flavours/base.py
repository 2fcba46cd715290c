"""The API flavour seam: how one agent-facing API maps onto an upstream chat or completions call."""

from __future__ import annotations

from typing import Any, Protocol

from alight.schemas import ApiFlavour
from alight_server.gateway.flavours.assemble import ChatAssembler, CompletionAssembler


class StreamTranslator(Protocol):
    """Turns upstream chunks into the agent's stream events, as SSE bytes."""

    def start(self) -> list[bytes]:
        """Events sent before the first upstream chunk."""
        ...

    def on_chunk(self, chunk: dict[str, Any]) -> tuple[list[bytes], list[bytes]]:
        """(events to send now, events to hold until the call is recorded)."""
        ...

    def finish(self, assembled: dict[str, Any]) -> list[bytes]:
        """Closing events, sent after the call is recorded."""
        ...

    def agent_response(self, assembled: dict[str, Any]) -> dict[str, Any]:
        """The whole response as the agent received it, for the record."""
        ...


class Flavour(Protocol):
    kind: ApiFlavour
    upstream_path: str  # "/chat/completions" or "/completions"
    anthropic_errors: bool

    def to_upstream(self, body: dict[str, Any]) -> dict[str, Any]:
        """The upstream request (before the gateway forces sampling fields); GatewayError 400 on bad input."""
        ...

    def from_upstream(self, upstream: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
        """The agent-facing response to a non-streamed call."""
        ...

    def stream(self, body: dict[str, Any]) -> StreamTranslator: ...

    def assembler(self) -> ChatAssembler | CompletionAssembler: ...


class ChatUpstream:
    """What the flavours sent upstream as chat completions share: the path, the error shape, the assembler."""

    upstream_path = "/chat/completions"
    anthropic_errors = False

    def assembler(self) -> ChatAssembler:
        return ChatAssembler()
