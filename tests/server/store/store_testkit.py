"""Shared builders for the store contract tests."""

from __future__ import annotations

from datetime import UTC, datetime

from alight.schemas import ApiFlavour, ModelCall


def model_call(call_id: str, rollout_id: str = "r", attempt: int = 1) -> ModelCall:
    """A small chat model call as the gateway records it; the store assigns its seq."""
    return ModelCall(
        id=call_id,
        rollout_id=rollout_id,
        attempt=attempt,
        seq=-1,
        flavour=ApiFlavour.CHAT,
        request={"messages": [{"role": "user", "content": call_id}]},
        response={"choices": []},
        prompt_token_ids=[1, 2, 3],
        response_token_ids=[4, 5],
        response_logprobs=[-0.5, -0.25],
        status_code=200,
        created_at=datetime.now(UTC),
    )
