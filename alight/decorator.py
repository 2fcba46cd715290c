# pyright: strict
"""`@alight.rollout`: the agent's entry function, traced as one attempt when the controller starts it.

What a call does under the controller (ALIGHT_ROLLOUT_ID set), step by step: docs/sdk.md, "Decorate the entry
function". Anywhere else, including inside another rollout, it is the plain function.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import math
import sys
from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar, cast

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Status, StatusCode

from alight import semconv, telemetry
from alight.context import AttemptContext, activate, deactivate, task_context

F = TypeVar("F", bound=Callable[..., Any])
_MARK = "__alight_rollout__"


def is_rollout(fn: object) -> bool:
    return bool(getattr(fn, _MARK, False))


def positional_params(fn: Callable[..., Any]) -> float:
    """How many positional arguments `fn` takes: inf with *args, or when its signature cannot be read."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return math.inf
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return math.inf
    return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)


class _Run:
    """One traced call of the entry function."""

    def __init__(self, fn: Callable[..., Any], ctx: AttemptContext, args: tuple[Any, ...], kwargs: dict[str, Any]):
        if not args and not kwargs and positional_params(fn) >= 1:
            args = (ctx.task,)
        self.args, self.kwargs = args, kwargs
        self.telemetry = telemetry.start(ctx)
        self.span = self.telemetry.tracer.start_span(
            semconv.SPAN_ROLLOUT,
            context=Context(),  # always a fresh trace: one trace per attempt
            attributes={semconv.ATTR_ROLLOUT_ID: ctx.rollout_id, semconv.ATTR_ATTEMPT: ctx.attempt},
        )
        self.telemetry.bind(self.span)
        self.ctx = replace(ctx, root_span=self.span)
        self.ctx_token = activate(self.ctx)
        self.otel_token = trace.use_span(self.span, end_on_exit=False)
        self.otel_token.__enter__()

    def succeeded(self, result: Any) -> Any:
        if isinstance(result, int | float) and not isinstance(result, bool):
            if not math.isfinite(result):
                raise ValueError(f"the rollout function returned {result}; a returned reward must be a finite number")
            self.span.add_event(
                semconv.EVENT_REWARD,
                {semconv.ATTR_REWARD_VALUE: float(result), semconv.ATTR_REWARD_FINAL: True},
            )
        self.span.set_status(Status(StatusCode.OK))
        return result

    def ended(self, exc: BaseException) -> None:
        """`sys.exit(0)` inside the agent is a success, anything else raised a failure."""
        if isinstance(exc, SystemExit) and exc.code in (0, None):
            self.succeeded(None)
            return
        self.span.record_exception(exc, escaped=True)  # its type, message and formatted traceback
        self.span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))

    def leave(self) -> None:
        """Undo the context switches; must run in the task/thread that entered them."""
        self.otel_token.__exit__(None, None, None)
        deactivate(self.ctx, self.ctx_token)

    def flush(self) -> None:
        """End the root span and send everything; blocking, so async callers run it in a thread."""
        self.span.end()
        if not self.telemetry.finish():
            print("alight: some spans could not be sent to the server before the timeout", file=sys.stderr)


def rollout(fn: F) -> F:
    """Mark `fn` as the agent's entry point (sync or async). See the module docstring."""

    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            ctx = AttemptContext.from_env() if task_context() is None else None
            if ctx is None:
                return await fn(*args, **kwargs)
            run = _Run(fn, ctx, args, kwargs)
            try:
                return run.succeeded(await fn(*run.args, **run.kwargs))
            except BaseException as exc:
                run.ended(exc)
                raise
            finally:
                run.leave()
                await asyncio.to_thread(run.flush)

        setattr(async_wrapper, _MARK, True)
        return cast(F, async_wrapper)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        ctx = AttemptContext.from_env() if task_context() is None else None
        if ctx is None:
            return fn(*args, **kwargs)
        run = _Run(fn, ctx, args, kwargs)
        try:
            return run.succeeded(fn(*run.args, **run.kwargs))
        except BaseException as exc:
            run.ended(exc)
            raise
        finally:
            run.leave()
            run.flush()

    setattr(wrapper, _MARK, True)
    return cast(F, wrapper)
