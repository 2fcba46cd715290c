"""Rollouts and their attempts: the state machine, what is created, what the controller is handed."""

from __future__ import annotations

import enum
import re
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from alight.schemas.strict import Label, Strict


class RolloutState(enum.StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


# The rollout state machine (docs/api.md), enforced by the store and nowhere else.
TRANSITIONS: dict[RolloutState, frozenset[RolloutState]] = {
    RolloutState.QUEUED: frozenset({RolloutState.RUNNING, RolloutState.CANCELLED, RolloutState.FAILED}),
    RolloutState.RUNNING: frozenset({RolloutState.SUCCEEDED, RolloutState.FAILED, RolloutState.CANCELLED}),
    RolloutState.SUCCEEDED: frozenset(),
    RolloutState.FAILED: frozenset(),
    RolloutState.CANCELLED: frozenset(),
}
TERMINAL_STATES = frozenset(s for s, nxt in TRANSITIONS.items() if not nxt)


class AttemptStatus(enum.StrEnum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class FailureKind(enum.StrEnum):
    TASK = "task"  # the agent raised or exited non-zero: final, scored by its reward rules
    INFRA = "infra"  # spawn failed, node lost, gateway unreachable: retried, never a fake reward
    TIMEOUT = "timeout"  # ran past the rollout's timeout: retried like infra
    # the gateway refused a call past the attempt's budget (calls, tokens, wall time): final, reward 0, like a task
    # failure (never skipped: running out of budget must not buy a policy a skipped sample)
    BUDGET = "budget_exceeded"


class Mode(enum.StrEnum):
    TRAIN = "train"
    VAL = "val"


class RunnerSpec(Strict):
    """What the controller starts for an attempt: `entrypoint` ("module:function" or "path/to/file.py:function",
    decorated with @alight.rollout) or `command` (any argv). `image` and `resources` (a container's
    `{"requests": {...}, "limits": {...}}`) are for the Kubernetes runner.

    The agent's environment is the attempt contract (alight.envvars), `env`, and only the host variables named:
    alight.envvars.DEFAULT_INHERIT_ENV plus `inherit_env`. `env` values are stored encrypted and answered as "***" by
    the API; only the controller starting the attempt sees them.
    """

    entrypoint: str | None = None
    command: list[str] | None = None
    cwd: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    inherit_env: list[str] = Field(
        default_factory=list,
        description="host variables (names or glob patterns like AWS_*) the agent gets besides PATH, LANG, "
        "LC_*, TZ, HOME and TMPDIR",
    )
    image: str | None = None
    resources: dict[str, dict[str, str]] | None = None

    @field_validator("inherit_env")
    @classmethod
    def _inherit_names_variables(cls, patterns: list[str]) -> list[str]:
        for pattern in patterns:
            if not re.fullmatch(r"[A-Za-z0-9_*?\[\]!]+", pattern):
                raise ValueError(
                    f"inherit_env entry {pattern!r} is not a variable name or glob pattern (letters, digits, _ and "
                    "* ? [ ] only)"
                )
            if pattern.upper().startswith("ALIGHT_"):
                raise ValueError(
                    f"inherit_env entry {pattern!r}: ALIGHT_* variables are the runner's own settings and never reach "
                    "an agent; give the agent a value with agent.env instead"
                )
        return patterns


class RolloutCreate(Strict):
    id: str | None = Field(default=None, min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._:-]+$")
    task: Any = None
    mode: Mode = Mode.TRAIN
    group_id: Label | None = Field(default=None, max_length=200)
    runner: RunnerSpec | None = None
    timeout_s: float = Field(default=600.0, gt=0, le=7 * 24 * 3600)
    max_attempts: int = Field(default=3, ge=1, le=100)
    metadata: dict[str, Any] = Field(default_factory=dict)


class Attempt(BaseModel):
    rollout_id: str
    attempt: int
    status: AttemptStatus
    failure_kind: FailureKind | None = None
    message: str | None = None
    exit_code: int | None = None
    runner_handle: str | None = None
    started_at: datetime
    ended_at: datetime | None = None


class Rollout(BaseModel):
    id: str
    task: Any = None
    mode: Mode
    group_id: str | None
    runner: RunnerSpec | None
    timeout_s: float
    max_attempts: int
    metadata: dict[str, Any]
    state: RolloutState
    policy_version: int
    created_at: datetime
    updated_at: datetime
    # Monotonic per-store change counter: list?since_seq=N never misses a rollout that finished out of order.
    seq: int
    attempts: list[Attempt] = Field(default_factory=list)


class AttemptStart(BaseModel):
    """What the server hands the controller for a claimed attempt."""

    rollout: Rollout
    attempt: int
    token: str
    gateway_base_url: str  # ends in /v1
    otlp_traces_endpoint: str


class AttemptFinish(Strict):
    status: Literal["succeeded", "failed"]
    failure_kind: FailureKind | None = None
    exit_code: int | None = None
    message: str | None = Field(default=None, max_length=20000)
    runner_handle: str | None = None


HANDLE_SEPARATOR = "/"


def attempt_handle(runner_name: str, rollout_id: str, attempt: int) -> str:
    """`local@host/rollout-id/2`, an attempt's `runner_handle`: rollout ids never contain '/', so it parses back.

    One format for the runner that makes handles and the store that records one when it claims an attempt."""
    return f"{runner_name}{HANDLE_SEPARATOR}{rollout_id}{HANDLE_SEPARATOR}{attempt}"


def parse_handle(handle: str) -> tuple[str, str, int]:
    """(runner name, rollout id, attempt) of a handle made by `attempt_handle`."""
    try:
        name, rollout_id, attempt = handle.rsplit(HANDLE_SEPARATOR, 2)
        return name, rollout_id, int(attempt)
    except ValueError as exc:
        raise ValueError(f"runner handle {handle!r} is not 'runner/rollout-id/attempt'") from exc
