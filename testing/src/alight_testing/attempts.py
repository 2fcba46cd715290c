"""An attempt as the server hands one to a runner (`AttemptStart`), built without a server for unit tests."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from alight.schemas import AttemptStart, Mode, Rollout, RolloutState, RunnerSpec


def attempt_start(
    rollout_id: str,
    attempt: int,
    task: Any,
    *,
    mode: Mode,
    runner: RunnerSpec | None,
    timeout_s: float,
    token: str,
    gateway_base_url: str,
    otlp_traces_endpoint: str,
) -> AttemptStart:
    """A running rollout's attempt, its claim as the server would answer it (policy version 0, 3 attempts)."""
    now = datetime.now(UTC)
    rollout = Rollout(id=rollout_id, task=task, mode=mode, group_id=None, runner=runner, timeout_s=timeout_s,
                      max_attempts=3, metadata={}, state=RolloutState.RUNNING, policy_version=0,
                      created_at=now, updated_at=now, seq=1)  # fmt: skip
    return AttemptStart(rollout=rollout, attempt=attempt, token=token, gateway_base_url=gateway_base_url,
                        otlp_traces_endpoint=otlp_traces_endpoint)  # fmt: skip
