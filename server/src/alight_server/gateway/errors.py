"""Gateway failures as OpenAI-shaped error responses (Anthropic-shaped on the messages route)."""

from __future__ import annotations

import orjson

from alight_server.gateway.reply import Reply, sse
from alight_server.http.error_types import error_body, error_type


class GatewayError(Exception):
    """A failure the agent should see as an HTTP error with a message a person can act on."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: str | None = None,
        headers: dict[str, str] | None = None,
        code: str | None = None,
        openai_type: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.headers = headers or {}
        self.code = code  # OpenAI's `code` and `type` where the provider's own differ from the status's
        self.openai_type = openai_type

    def body(self, anthropic: bool = False) -> dict[str, object]:
        if anthropic:
            return {"type": "error", "error": {"type": error_type(self.status), "message": self.message}}
        body = error_body(self.status, self.message, param=self.param, code=self.code)
        if self.openai_type is not None:
            body["error"]["type"] = self.openai_type
        return body

    def reply(self, anthropic: bool = False) -> Reply:
        return Reply(self.status, orjson.dumps(self.body(anthropic)), headers=self.headers)

    def sse(self, anthropic: bool = False) -> bytes:
        """The error as one server-sent event, for failures after a stream has begun."""
        return sse(self.body(anthropic), named=anthropic)
