"""Shared wire schemas: what the server stores and serves, and what clients send; field names are the JSON names."""

from __future__ import annotations

from alight.schemas.calls import RENDERED_FLAG, ApiFlavour, ModelCall
from alight.schemas.events import Event, EventCreate
from alight.schemas.gates import (
    MAX_EVIDENCE_CHARS,
    REVIEW_DECISION,
    REVIEW_FLAG,
    REVIEW_REQUESTED,
    REWARD_HACKING,
    GateFlag,
    GatePayload,
    ReviewDecision,
    ReviewRequest,
    ReviewState,
    review_state,
)
from alight.schemas.gateway import GatewayPause, GatewayReplica, GatewaySync
from alight.schemas.rewards import JUDGEMENT, Reward, RewardCreate, RewardSource
from alight.schemas.rollouts import (
    TERMINAL_STATES,
    TRANSITIONS,
    Attempt,
    AttemptFinish,
    AttemptStart,
    AttemptStatus,
    FailureKind,
    Mode,
    Rollout,
    RolloutCreate,
    RolloutState,
    RunnerSpec,
    attempt_handle,
    parse_handle,
)
from alight.schemas.runs import Run, RunReport, RunStatus, RunStep, RunStepReport
from alight.schemas.spans import SpanRecord
from alight.schemas.strict import Strict
from alight.schemas.trajectory import CallOutput, ToolCallView, ToolSpan, Trajectory, TrajectoryCall
from alight.schemas.upstreams import PolicyVersion, Upstream, UpstreamCreate

__all__ = [
    "JUDGEMENT",
    "MAX_EVIDENCE_CHARS",
    "RENDERED_FLAG",
    "REVIEW_DECISION",
    "REVIEW_FLAG",
    "REVIEW_REQUESTED",
    "REWARD_HACKING",
    "TERMINAL_STATES",
    "TRANSITIONS",
    "ApiFlavour",
    "Attempt",
    "AttemptFinish",
    "AttemptStart",
    "AttemptStatus",
    "CallOutput",
    "Event",
    "EventCreate",
    "FailureKind",
    "GateFlag",
    "GatePayload",
    "GatewayPause",
    "GatewayReplica",
    "GatewaySync",
    "Mode",
    "ModelCall",
    "PolicyVersion",
    "ReviewDecision",
    "ReviewRequest",
    "ReviewState",
    "Reward",
    "RewardCreate",
    "RewardSource",
    "Rollout",
    "RolloutCreate",
    "RolloutState",
    "Run",
    "RunReport",
    "RunStatus",
    "RunStep",
    "RunStepReport",
    "RunnerSpec",
    "SpanRecord",
    "Strict",
    "ToolCallView",
    "ToolSpan",
    "Trajectory",
    "TrajectoryCall",
    "Upstream",
    "UpstreamCreate",
    "attempt_handle",
    "parse_handle",
    "review_state",
]
