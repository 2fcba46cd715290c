"""Shared wire schemas: what the server stores and serves, and what clients send.

The server, the controller, the trainer and the SDK client all speak these
models; the store keeps them durably. Field names are the JSON names.
"""

from __future__ import annotations

import enum
import math
from datetime import datetime
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator


class Strict(BaseModel):
    """Request bodies: unknown fields are an error, not silently dropped."""

    model_config = ConfigDict(extra="forbid")


class RolloutState(enum.StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


# The rollout state machine (DESIGN §3), enforced by the store and nowhere else.
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


class Mode(enum.StrEnum):
    TRAIN = "train"
    VAL = "val"


class RunnerSpec(Strict):
    """What the controller starts for an attempt.

    Either `entrypoint` ("module:function" or "path/to/file.py:function",
    decorated with @alight.rollout) or `command` (any argv). `image` is for
    the Kubernetes runner, as is `resources` (a container's
    `{"requests": {...}, "limits": {...}}`).
    """

    entrypoint: str | None = None
    command: list[str] | None = None
    cwd: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    image: str | None = None
    resources: dict[str, dict[str, str]] | None = None


class RolloutCreate(Strict):
    id: str | None = Field(default=None, min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._:-]+$")
    task: Any = None
    mode: Mode = Mode.TRAIN
    group_id: str | None = Field(default=None, max_length=200)
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
    # Monotonic per-store change counter: list?since_seq=N never misses a
    # rollout that finished out of order.
    seq: int
    attempts: list[Attempt] = Field(default_factory=list)


REWARD_HACKING = "reward_hacking"  # the event kind of a hard gate's violation (alight.guards); payload: GatePayload
MAX_EVIDENCE_CHARS = 2000


class GatePayload(Strict):
    """A `reward_hacking` event's payload, the one shape the trainer, `alight eval` and the dashboard read."""

    rule: str = Field(min_length=1, max_length=64, pattern=r"^[a-z][a-z0-9_]*$")  # e.g. test_file_modified
    evidence: str = Field(max_length=MAX_EVIDENCE_CHARS)  # what the sandbox recorded, not the agent's claim


class EventCreate(Strict):
    """An event appended to a rollout. `id` makes the append idempotent."""

    id: str | None = Field(default=None, min_length=1, max_length=200)
    attempt: int | None = Field(default=None, ge=1)
    kind: str = Field(min_length=1, max_length=100)
    payload: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _gate_payload_shape(self) -> EventCreate:
        if self.kind == REWARD_HACKING:
            try:
                GatePayload.model_validate(self.payload)
            except ValidationError as exc:
                problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'payload'}: {e['msg']}" for e in exc.errors())
                raise ValueError(
                    f"a {REWARD_HACKING} event's payload must be {{rule: snake_case name, evidence: text of at most "
                    f"{MAX_EVIDENCE_CHARS} chars}} and nothing else ({problems})"
                ) from None
        return self


class Event(BaseModel):
    id: str
    rollout_id: str
    attempt: int | None
    kind: str
    payload: dict[str, Any]
    created_at: datetime


class RewardSource(enum.StrEnum):
    AGENT = "agent"
    EVALUATOR = "evaluator"
    FALLBACK = "fallback"


class RewardCreate(Strict):
    id: str | None = Field(default=None, min_length=1, max_length=200)
    attempt: int = Field(ge=1)
    value: float
    name: str | None = Field(default=None, max_length=200)
    final: bool = False
    span_id: str | None = None
    model_call_id: str | None = None
    source: RewardSource = RewardSource.AGENT

    @field_validator("value")
    @classmethod
    def _finite(cls, v: float) -> float:
        if not math.isfinite(v):
            raise ValueError(f"reward value must be a finite number, got {v}")
        return v


class Reward(RewardCreate):
    model_config = ConfigDict(extra="ignore")
    id: str  # type: ignore[assignment]
    rollout_id: str
    created_at: datetime


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


class SpanRecord(BaseModel):
    """An OpenTelemetry span received over OTLP, keyed by rollout and attempt."""

    trace_id: str  # 32 hex
    span_id: str  # 16 hex
    parent_span_id: str | None = None
    rollout_id: str
    attempt: int
    name: str
    kind: int = 0
    start_time_ns: int
    end_time_ns: int | None = None
    attributes: dict[str, Any] = Field(default_factory=dict)
    events: list[dict[str, Any]] = Field(default_factory=list)  # {"name", "time_ns", "attributes"}
    status_code: int = 0  # 0 unset, 1 ok, 2 error
    status_message: str | None = None


class UpstreamCreate(Strict):
    id: str | None = Field(default=None, min_length=1, max_length=200)
    url: str = Field(min_length=1, max_length=2000, description="OpenAI-compatible base URL, ending in /v1")
    policy_version: int = Field(default=0, ge=0)
    model: str | None = Field(default=None, description="model name the upstream serves")
    # At most one of the three. No length limit on api_key: a refused value would be echoed in the 422.
    api_key: str | None = Field(
        default=None, min_length=1, description="stored encrypted under the server's ALIGHT_SECRET_KEY, never returned"
    )
    api_key_env: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        max_length=200,
        description="name of a variable in the server's environment holding the key, read at each use",
    )
    api_key_file: str | None = Field(
        default=None,
        min_length=2,
        max_length=4000,
        description="absolute path of a file holding the key, read at each use",
    )

    @field_validator("url")
    @classmethod
    def _http_url_with_a_host(cls, value: str) -> str:
        """Refused at registration, not at the first model call: a typo would otherwise fail every call."""
        parts = urlsplit(value)
        try:
            port_ok = parts.port is None or 0 < parts.port < 65536
        except ValueError:
            port_ok = False
        if parts.scheme not in ("http", "https") or not parts.hostname or not port_ok or value != value.strip():
            raise ValueError(
                f"an upstream url is an http:// or https:// base URL with a host (and a valid port), like "
                f"http://127.0.0.1:8000/v1; got {value!r}"
            )
        if parts.query or parts.fragment:
            raise ValueError(f"an upstream url has no query or fragment (the gateway appends paths); got {value!r}")
        return value

    @field_validator("api_key_file")
    @classmethod
    def _absolute_path(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith("/"):
            raise ValueError("api_key_file is an absolute path on the server's machine, like /run/secrets/vllm-key")
        return value

    @model_validator(mode="after")
    def _one_key_source(self) -> UpstreamCreate:
        given = [name for name in ("api_key", "api_key_env", "api_key_file") if getattr(self, name) is not None]
        if len(given) > 1:
            raise ValueError(f"give at most one of api_key, api_key_env and api_key_file; got {' and '.join(given)}")
        return self


class Upstream(BaseModel):
    id: str
    url: str
    policy_version: int
    model: str | None
    api_key_encrypted: bool = Field(default=False, description="an api_key is stored (encrypted; never returned)")
    api_key_env: str | None = None
    api_key_file: str | None = None
    # The stored Fernet token: the gateway opens it to call the upstream; never serialized into API answers.
    api_key_sealed: str | None = Field(default=None, exclude=True, repr=False)
    created_at: datetime


class PolicyVersion(BaseModel):
    version: int
    created_at: datetime
    metadata: dict[str, Any] = Field(default_factory=dict)


class GatewayPause(BaseModel):
    """The pause every gateway replica on one store follows; `epoch` moves on each pause and resume."""

    paused: bool
    epoch: int


class GatewayReplica(BaseModel):
    """One gateway process serving from a store, as it last reported itself."""

    id: str
    address: str = Field(description="host:pid, for people")
    paused: bool
    pause_epoch: int = Field(description="the newest pause epoch this replica has applied")
    in_flight: int
    reported_at: float = Field(description="unix time of the report")


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


class ToolCallView(BaseModel):
    """One tool call the model asked for, whatever the API flavour spelled it as."""

    id: str | None = None
    name: str
    arguments: Any = None  # the JSON arguments as the model wrote them (a string for OpenAI flavours)


class CallOutput(BaseModel):
    """What one model call answered, the same for chat, completions, responses and messages.

    `finish_reason` uses the chat completions words: stop, length, tool_calls, content_filter
    (None for a call that failed or was interrupted).
    """

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

    @property
    def final_output(self) -> CallOutput:
        """The last call's answer (empty when the attempt made no call): what an evaluator usually scores."""
        return self.calls[-1].output if self.calls else CallOutput()


class RunStatus(enum.StrEnum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class RunReport(Strict):
    """A training run as its trainer reports it at start and end; reporting an id again updates it."""

    id: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._:-]+$")
    status: RunStatus = RunStatus.RUNNING
    config: dict[str, Any] = Field(default_factory=dict)
    steps_planned: int | None = Field(default=None, ge=0, le=2**31 - 1)


class Run(BaseModel):
    id: str
    status: RunStatus
    config: dict[str, Any]
    steps_planned: int | None
    step: int | None = Field(description="the newest step with reported metrics; null before any")
    created_at: datetime
    updated_at: datetime


class RunStepReport(Strict):
    """One step's metrics (`train/reward_mean`, `val/score`, `time/rollouts_s`, ...); finite numbers only."""

    step: int = Field(ge=0, le=2**31 - 1)
    metrics: dict[str, float] = Field(max_length=1000)

    @field_validator("metrics")
    @classmethod
    def _finite(cls, metrics: dict[str, float]) -> dict[str, float]:
        bad = sorted(k for k, v in metrics.items() if not math.isfinite(v))
        if bad:
            raise ValueError(f"metrics must be finite numbers; drop NaN/inf values of {bad[:5]}")
        return metrics


class RunStep(BaseModel):
    run_id: str
    step: int
    metrics: dict[str, float]
    created_at: datetime
