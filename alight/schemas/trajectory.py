"""The trajectory: an attempt's model calls joined with their answers, spans and rewards."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from alight.schemas.calls import ModelCall
from alight.schemas.gates import REWARD_HACKING, GateFlag, ReviewState
from alight.schemas.rewards import Reward
from alight.schemas.rollouts import AttemptStatus, FailureKind, Mode, RolloutState


class ToolCallView(BaseModel):
    """One tool call the model asked for, whatever the API flavour spelled it as."""

    id: str | None = None
    name: str
    arguments: Any = None  # the JSON arguments as the model wrote them (a string for OpenAI flavours)


class CallOutput(BaseModel):
    """What one model call answered, the same for chat, completions, responses and messages. `finish_reason` uses
    the chat completions words: stop, length, tool_calls, content_filter (None for a failed or interrupted call)."""

    text: str = ""
    tool_calls: list[ToolCallView] = Field(default_factory=list)
    finish_reason: str | None = None


class TrajectoryCall(BaseModel):
    call: ModelCall
    # The answer as text, tool calls and finish reason, for evaluators and people (`call.response` is raw).
    output: CallOutput = Field(default_factory=CallOutput)
    # Span names from the root to the span that made the call; [] outside any span.
    span_path: list[str] = Field(default_factory=list)
    agent_name: str | None = None
    rewards: list[Reward] = Field(default_factory=list)
    # Several policies: the policy that served the call (its `policy:<name>` flag) and that policy's own
    # version then (the bumps up to `call.policy_version` that changed it); None in a single-policy run.
    policy: str | None = None
    policy_own_version: int | None = None


class ToolSpan(BaseModel):
    """A tool span (or another span that is not a model call) of an attempt, placed among its model calls."""

    span_id: str
    parent_span_id: str | None = None
    name: str
    tool_name: str | None = None  # gen_ai.tool.name and the rest, where the instrumentation set them
    tool_call_id: str | None = None
    arguments: Any = None
    result: Any = None
    start_time_ns: int
    end_time_ns: int | None = None
    status_code: int = 0  # OTLP's: 0 unset, 1 ok, 2 error
    # The index of the model call that precedes it (-1 before the first call).
    after_call: int = -1
    # Span names from the root to this span.
    span_path: list[str] = Field(default_factory=list)
    agent_name: str | None = None

    @property
    def failed(self) -> bool:
        return self.status_code == 2


class Trajectory(BaseModel):
    rollout_id: str
    attempt: int
    group_id: str | None
    mode: Mode
    state: RolloutState
    attempt_status: AttemptStatus | None
    failure_kind: FailureKind | None
    calls: list[TrajectoryCall]
    # Tool and other non-model spans, in start order.
    tool_spans: list[ToolSpan] = Field(default_factory=list)
    rewards: list[Reward]
    final_reward: float | None
    task: Any = None  # the rollout's task, as the agent got it
    # The rollout's gate findings (reward_hacking, review_flag events), from any attempt: a rollout a hard gate
    # flagged is left out of training whichever attempt is trained on.
    gate_flags: list[GateFlag] = Field(default_factory=list)
    # The rollout's review (gates.review_state of its events): pending while a flag or an audit request waits
    # for a person, out of training under `review.flags: quarantine`; accepted or rejected once decided.
    review: ReviewState = "clear"
    # The grader's gates ran on the rollout (it recorded an `episode` event, alight_sandbox.guards): only such a
    # rollout can have "passed every gate", so only such rollouts are drawn by the random audit. A run with no
    # gates (the quickstart) is never held for a review nobody was asked to give.
    gated: bool = False

    @property
    def gate_flagged(self) -> bool:
        """A hard gate flagged the rollout (a `reward_hacking` event): not training data, whatever its reward."""
        return any(flag.kind == REWARD_HACKING for flag in self.gate_flags)

    @property
    def final_output(self) -> CallOutput:
        """The last call's answer (empty when the attempt made no call): what an evaluator usually scores."""
        return self.calls[-1].output if self.calls else CallOutput()
