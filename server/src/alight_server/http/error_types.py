"""Error answers: their one shape and their `type` per HTTP status, for the API, the gateway, the inference server.

Spelled as the model providers spell theirs (`invalid_request_error`, `not_found_error`, ...), because the
gateway answers agents in those providers' shapes and their SDKs show the type; the API says the same.
"""

from __future__ import annotations

from typing import Any

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "method_not_allowed_error",
    409: "conflict_error",
    410: "not_found_error",  # a purged rollout: it was there, and is deleted
    413: "request_too_large",
    422: "invalid_request_error",
    429: "rate_limit_error",
    502: "upstream_error",
    503: "service_unavailable",
    504: "upstream_timeout",
}


def error_type(status: int) -> str:
    """The table's type; any other 4xx is an invalid request, any other 5xx an `api_error`."""
    return ERROR_TYPES.get(status, "invalid_request_error" if status < 500 else "api_error")


def error_body(status: int, message: str, *, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    """The one error answer of the API, the gateway and the inference server, shaped as OpenAI's and typed by the
    table above. `param` names the field at fault (None: no one field); `code` is the HTTP status unless a more
    precise code is given (`model_not_found`), as the providers' SDKs show it."""
    return {"error": {"message": message, "type": error_type(status), "param": param, "code": code or status}}
