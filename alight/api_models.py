"""Request and response envelopes of the server's /api routes (the objects inside are in alight.schemas)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from alight.schemas import (
    AttemptStart,
    Event,
    FailureKind,
    Mode,
    PolicyVersion,
    Reward,
    Rollout,
    RolloutCreate,
    RolloutState,
    Run,
    RunStep,
    Strict,
    Upstream,
)

MAX_BATCH = 1000


class RolloutBatch(Strict):
    rollouts: list[RolloutCreate] = Field(min_length=1, max_length=MAX_BATCH)


class RolloutList(BaseModel):
    rollouts: list[Rollout]


class RolloutFilter(Strict):
    """Which rollouts: every field narrows the set; None matches all."""

    state: list[RolloutState] | None = Field(default=None, description="any of these; repeat to give several")
    mode: Mode | None = None
    group_id: str | None = Field(default=None, max_length=200)
    ids: list[str] | None = Field(default=None, max_length=MAX_BATCH)
    # A training run's rollouts share `<run id>-` (trainer/run/rollouts.py names them).
    id_prefix: str | None = Field(default=None, max_length=200)
    failure_kind: FailureKind | None = Field(default=None, description="of the latest attempt")


class RolloutQuery(RolloutFilter):
    """A page of `GET /api/rollouts`: the rollouts changed after `since_seq`, oldest change first; the same object
    is the client's argument, the route's query parameters and the store's."""

    since_seq: int = Field(default=0, ge=0, le=2**62)
    limit: int = Field(default=100, ge=1, le=MAX_BATCH)


class RolloutPage(BaseModel):
    rollouts: list[Rollout]
    # Pass back as since_seq to get only what changed after this page.
    next_seq: int


class StatusChange(Strict):
    state: RolloutState


class WaitRequest(Strict):
    ids: list[str] = Field(min_length=1, max_length=MAX_BATCH)
    timeout_s: float = Field(default=30.0, ge=0, le=600)


class WaitResult(BaseModel):
    """`done` holds the finished rollouts; `pending` the ids still going when the wait ended."""

    done: list[Rollout]
    pending: list[str]


class ClaimRequest(Strict):
    limit: int = Field(default=1, ge=1, le=MAX_BATCH)
    ids: list[str] | None = Field(default=None, max_length=MAX_BATCH)
    # The claiming runner's name: each attempt's handle is recorded in the claim's own transaction,
    # so a controller killed right after claiming leaves attempts its successor recognises as its own.
    runner: str | None = Field(default=None, min_length=1, max_length=200, pattern=r"^[^/]+$")


class ClaimResult(BaseModel):
    attempts: list[AttemptStart]


class RunnerHandle(Strict):
    runner_handle: str = Field(min_length=1, max_length=500)


class EventList(BaseModel):
    events: list[Event]


class RewardList(BaseModel):
    rewards: list[Reward]


class UpstreamList(BaseModel):
    upstreams: list[Upstream]


class PolicyCreate(Strict):
    metadata: dict[str, Any] = Field(default_factory=dict)


class PolicyState(BaseModel):
    current: int  # 0 before any version was added
    versions: list[PolicyVersion]


class Health(BaseModel):
    status: str


class RunList(BaseModel):
    runs: list[Run]


class RunStepList(BaseModel):
    steps: list[RunStep]
