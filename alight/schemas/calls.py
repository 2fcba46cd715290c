"""Model calls: one request through the gateway, with its token ids and logprobs, and its API flavour."""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

# In `ModelCall.flags`: a call imported from logs known only as text (`alight data import`), its token ids the
# policy's own rendering of that text and no logprobs recorded. Without it a call is `exact`: ids as served.
RENDERED_FLAG = "fidelity:rendered"


class ApiFlavour(enum.StrEnum):
    CHAT = "chat"
    COMPLETIONS = "completions"
    RESPONSES = "responses"
    MESSAGES = "messages"


class ModelCall(BaseModel):
    """One request through the gateway, as recorded before the agent saw the answer."""

    id: str
    rollout_id: str
    attempt: int
    seq: int  # order within the attempt, from 0
    trace_id: str | None = None  # from the caller's W3C traceparent
    span_id: str | None = None
    flavour: ApiFlavour
    request: dict[str, Any]
    response: dict[str, Any] | None = None
    prompt_token_ids: list[int] = Field(default_factory=list)
    response_token_ids: list[int] = Field(default_factory=list)
    response_logprobs: list[float] = Field(default_factory=list)
    # n > 1: one entry per extra choice, each {"token_ids": [...], "logprobs": [...]}
    extra_choices: list[dict[str, Any]] = Field(default_factory=list)
    policy_version: int | None = None
    upstream: str | None = None
    latency_ms: float | None = None
    status_code: int
    error: str | None = None
    streamed: bool = False
    # Set when token ids and logprobs disagree in length and the like: kept, not trained on.
    flags: list[str] = Field(default_factory=list)
    created_at: datetime

    @property
    def rendered(self) -> bool:
        """Fidelity `rendered` (RENDERED_FLAG): no recorded logprobs, so never in a policy-gradient ratio."""
        return RENDERED_FLAG in self.flags
