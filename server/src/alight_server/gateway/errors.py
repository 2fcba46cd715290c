"""Gateway failures as OpenAI-shaped error responses (Anthropic-shaped on the messages route)."""

from __future__ import annotations

import orjson

from alight_server.gateway.request.reply import Reply

_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    409: "conflict_error",
    413: "request_too_large",
    429: "rate_limit_error",
    502: "upstream_error",
    503: "service_unavailable",
    504: "upstream_timeout",
}


class GatewayError(Exception):
    """A failure the agent should see as an HTTP error with a message a person can act on."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.headers = headers or {}

    def body(self, anthropic: bool = False) -> dict[str, object]:
        kind = _TYPES.get(self.status, "api_error" if self.status >= 500 else "invalid_request_error")
        if anthropic:
            return {"type": "error", "error": {"type": kind, "message": self.message}}
        return {"error": {"message": self.message, "type": kind, "param": self.param, "code": self.status}}

    def reply(self, anthropic: bool = False) -> Reply:
        return Reply(self.status, orjson.dumps(self.body(anthropic)), headers=self.headers)

    def sse(self, anthropic: bool = False) -> bytes:
        """The error as one server-sent event, for failures after a stream has begun."""
        if anthropic:
            return b"event: error\ndata: " + orjson.dumps(self.body(True)) + b"\n\n"
        return b"data: " + orjson.dumps(self.body()) + b"\n\n"
