"""Hand-built model calls and trajectories for the sample builder tests."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from alight.schemas import (
    ApiFlavour,
    FailureKind,
    Mode,
    ModelCall,
    Reward,
    RolloutState,
    Trajectory,
    TrajectoryCall,
)

CREATED = datetime(2026, 1, 1, tzinfo=UTC)


def logprobs_for(seq: int, n: int) -> list[float]:
    """Distinct recorded logprobs, so a misaligned one is caught: call 2 token 1 -> -2.01."""
    return [-(seq + i / 100) for i in range(n)]


def model_call(
    seq: int,
    prompt: Sequence[int],
    response: Sequence[int],
    *,
    rollout_id: str = "r1",
    attempt: int = 1,
    logprobs: Sequence[float] | None = None,
    messages: list[dict[str, Any]] | None = None,
    reply: str | None = None,
    flavour: ApiFlavour = ApiFlavour.CHAT,
    request: dict[str, Any] | None = None,
    response_body: dict[str, Any] | None = None,
    status_code: int = 200,
    error: str | None = None,
    flags: Sequence[str] = (),
    policy_version: int | None = 0,
) -> ModelCall:
    if request is None:
        request = {"model": "policy", "messages": messages or []}
    if response_body is None and reply is not None:
        response_body = {"choices": [{"index": 0, "message": {"role": "assistant", "content": reply}}]}
    return ModelCall(
        id=f"{rollout_id}-{attempt}-{seq}",
        rollout_id=rollout_id,
        attempt=attempt,
        seq=seq,
        flavour=flavour,
        request=request,
        response=response_body,
        prompt_token_ids=list(prompt),
        response_token_ids=list(response),
        response_logprobs=list(logprobs) if logprobs is not None else logprobs_for(seq, len(response)),
        policy_version=policy_version,
        status_code=status_code,
        error=error,
        flags=list(flags),
        created_at=CREATED,
    )


def step_reward(call: ModelCall, value: float) -> Reward:
    return Reward(
        id=f"{call.id}-reward",
        rollout_id=call.rollout_id,
        attempt=call.attempt,
        value=value,
        model_call_id=call.id,
        created_at=CREATED,
    )


def trajectory(
    calls: Sequence[ModelCall | TrajectoryCall],
    *,
    rollout_id: str = "r1",
    group_id: str | None = "g1",
    reward: float | None = 1.0,
    failure_kind: FailureKind | None = None,
) -> Trajectory:
    wrapped = [c if isinstance(c, TrajectoryCall) else TrajectoryCall(call=c) for c in calls]
    return Trajectory(
        rollout_id=rollout_id,
        attempt=1,
        group_id=group_id,
        mode=Mode.TRAIN,
        state=RolloutState.FAILED if failure_kind else RolloutState.SUCCEEDED,
        attempt_status=None,
        failure_kind=failure_kind,
        calls=wrapped,
        rewards=[],
        final_reward=reward,
    )


def chat(*turns: tuple[str, str]) -> list[dict[str, Any]]:
    return [{"role": role, "content": content} for role, content in turns]
