# pyright: strict
"""The attempt a harness works for: its gateway URL and token, from the context the controller set."""

from __future__ import annotations

from dataclasses import dataclass

from alight.context import AttemptContext, task_context


@dataclass(frozen=True)
class HarnessAttempt:
    rollout_id: str
    attempt: int
    gateway_url: str  # the OpenAI-style base URL, ending in /v1
    token: str


def current_attempt() -> HarnessAttempt:
    ctx = task_context() or AttemptContext.from_env()
    if ctx is None or not ctx.gateway_base_url or not ctx.token:
        raise RuntimeError(
            "a CLI harness runs as one attempt: start it through the controller (alight train / alight controller) "
            "or `alight run`, which set ALIGHT_ROLLOUT_ID, ALIGHT_GATEWAY_URL and ALIGHT_TOKEN"
        )
    return HarnessAttempt(ctx.rollout_id, ctx.attempt, ctx.gateway_base_url, ctx.token)
