"""A refused call as the provider of its flavour answers one: a rate limit to retry, or a spent budget.

Each answer's status, headers and body, and how the openai and anthropic SDKs treat it: docs/gateway.md
"Budgets and rate limits".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from alight_server.gateway.errors import GatewayError


@dataclass(frozen=True)
class Refusal:
    """A call turned away: over a rate (retry after `wait_s`), or past its attempt's budget (`wait_s` None)."""

    limit: str  # calls, tokens, completion_tokens, wall_s; run_requests, run_tokens, upstream_requests, ...
    message: str
    wait_s: float | None = None
    first: bool = False  # the attempt's first budget refusal: the gateway records the breach once

    def error(self, anthropic: bool) -> GatewayError:
        if self.wait_s is not None:
            ms = max(1, math.ceil(self.wait_s * 1000))
            headers = {"retry-after": str(math.ceil(ms / 1000)), "retry-after-ms": str(ms)}
            kind = "tokens" if self.limit.endswith("tokens") else "requests"
            message = f"{self.message}; please try again in {ms / 1000:.3g}s"
            return GatewayError(429, message, headers=headers, code="rate_limit_exceeded", openai_type=kind)
        final = {"x-should-retry": "false"}
        if anthropic:
            return GatewayError(400, f"You have reached your specified API usage limits: {self.message}", headers=final)
        return GatewayError(
            429, self.message, headers=final, code="insufficient_quota", openai_type="insufficient_quota"
        )
