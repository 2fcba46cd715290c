# pyright: strict
"""The attempt context (ids, mode, task, gateway URL, token) and reward/emit from inside a rollout."""

from __future__ import annotations

import contextvars
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from opentelemetry import trace
from opentelemetry.util.types import AttributeValue

from alight import envvars, semconv


@dataclass(frozen=True)
class AttemptContext:
    """Who this process works for: one attempt of one rollout, as the controller started it."""

    rollout_id: str
    attempt: int
    mode: str
    task: Any
    server_url: str | None
    gateway_base_url: str | None
    token: str | None
    otlp_traces_endpoint: str | None = None
    # The root `alight.rollout` span while the rollout runs; rewards fall back to it.
    root_span: trace.Span | None = field(default=None, compare=False, repr=False)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> AttemptContext | None:
        """The context the controller set up, or None outside the controller (no ALIGHT_ROLLOUT_ID)."""
        environ = os.environ if environ is None else environ
        rollout_id = environ.get(envvars.ALIGHT_ROLLOUT_ID)
        if not rollout_id:
            return None
        raw_attempt = environ.get(envvars.ALIGHT_ATTEMPT, "1")
        try:
            attempt = int(raw_attempt)
        except ValueError as exc:
            raise RuntimeError(f"{envvars.ALIGHT_ATTEMPT} must be an integer, got {raw_attempt!r}") from exc
        server_url = environ.get(envvars.ALIGHT_SERVER_URL)
        gateway = environ.get(envvars.ALIGHT_GATEWAY_URL) or environ.get(envvars.OPENAI_BASE_URL)
        if not gateway and server_url:
            gateway = envvars.gateway_url(server_url, rollout_id, attempt)
        otlp = environ.get(envvars.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)
        if not otlp and server_url:
            otlp = envvars.otlp_traces_url(server_url)
        return cls(
            rollout_id=rollout_id,
            attempt=attempt,
            mode=environ.get(envvars.ALIGHT_MODE, "train"),
            task=envvars.read_task(environ),
            server_url=server_url,
            gateway_base_url=gateway,
            token=environ.get(envvars.ALIGHT_TOKEN),
            otlp_traces_endpoint=otlp,
        )


_current: contextvars.ContextVar[AttemptContext | None] = contextvars.ContextVar("alight_attempt", default=None)
# Threads started with threading.Thread do not inherit contextvars; with one rollout per process (the controller's
# model) the process-wide one is right.
_process: list[AttemptContext] = []


def task_context() -> AttemptContext | None:
    """The rollout this asyncio task or thread entered (no process-wide fallback)."""
    return _current.get()


def current() -> AttemptContext | None:
    """The running rollout's context, from any thread or task inside it; None outside a rollout."""
    return _current.get() or (_process[-1] if _process else None)


def activate(ctx: AttemptContext) -> contextvars.Token[AttemptContext | None]:
    """Make `ctx` current for this task/thread and, as a fallback, the whole process."""
    _process.append(ctx)
    return _current.set(ctx)


def deactivate(ctx: AttemptContext, token: contextvars.Token[AttemptContext | None]) -> None:
    _current.reset(token)
    if ctx in _process:
        _process.remove(ctx)


def _target_span() -> trace.Span | None:
    """The current span if it belongs to the rollout's trace (only that trace is exported), else the root."""
    span = trace.get_current_span()
    ctx = current()
    root = ctx.root_span if ctx is not None else None
    if root is None or not root.is_recording():
        return span if span.is_recording() else None
    if span.is_recording() and span.get_span_context().trace_id == root.get_span_context().trace_id:
        return span
    return root


def reward(value: float, name: str | None = None, final: bool = False, *, model_call_id: str | None = None) -> None:
    """Record a reward on the current span (else the rollout's root span); `model_call_id` links a step reward to
    one model call. Outside a rollout this checks the value and does nothing else: an agent runs the same without
    alight."""
    checked = cast(object, value)  # callers are not type-checked: a string or None must fail clearly
    if isinstance(checked, bool) or not isinstance(checked, int | float):
        raise TypeError(f"reward value must be a number, got {type(value).__name__} {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"reward value must be a finite number, got {value}; clip or replace it before reporting")
    span = _target_span()
    if span is None:
        return
    attributes: dict[str, AttributeValue] = {semconv.ATTR_REWARD_VALUE: float(value), semconv.ATTR_REWARD_FINAL: final}
    if name is not None:
        attributes[semconv.ATTR_REWARD_NAME] = name
    if model_call_id is not None:
        attributes[semconv.ATTR_REWARD_MODEL_CALL_ID] = model_call_id
    span.add_event(semconv.EVENT_REWARD, attributes)


def emit(name: str, **attributes: Any) -> None:
    """Record a free-form event on the current span; values that are not OTel primitives become strings."""
    span = _target_span()
    if span is None:
        return
    primitive = {key: val if isinstance(val, str | bool | int | float) else str(val) for key, val in attributes.items()}
    span.add_event(semconv.EVENT_EMIT, {semconv.ATTR_EVENT_NAME: name, **primitive})
