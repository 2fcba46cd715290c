"""Evaluators: score a finished attempt from outside the agent, for agents that report no reward themselves.

What `evaluator:` takes (a Python reference or a check command's argv), when it runs (the agent's own outcomes
only: a timeout or infra failure did nothing to score) and what it may return: docs/sdk.md, "Evaluators".
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import math
import os
import subprocess
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI

from alight import envvars
from alight.decorator import positional_params
from alight.entry import awaited, load_target
from alight.schemas import (
    AttemptFinish,
    AttemptStatus,
    FailureKind,
    RewardCreate,
    RewardSource,
    Rollout,
    Trajectory,
)
from alight_server.config import ServerConfig
from alight_server.evaluation.sources import load_scorer, plugin
from alight_server.store.base import Store
from alight_server.trajectories.join import build_trajectory

EvaluatorSpec = str | list[str] | dict[str, str]  # a Python reference, a check command's argv, {source: NAME}
# Internally every evaluator is called with the rollout (task, runner cwd) and the attempt's trajectory.
Evaluator = Callable[[Rollout, Trajectory], Any]
# A check runs inside the controller's finish report, whose HTTP client gives up after 60 s.
CHECK_TIMEOUT_S = 50.0


def load_evaluator(spec: EvaluatorSpec) -> Evaluator:
    """The evaluator a config names; a bad reference fails now, with what to fix."""
    if isinstance(spec, list):
        if not spec or not all(isinstance(a, str) and a for a in spec):
            raise ValueError(f"an evaluator command must be a non-empty list of strings (argv), got {spec!r}")
        return CheckCommand(spec)
    if isinstance(spec, dict):
        return source_scorer(spec)
    try:
        target = load_target(spec)
    except Exception as exc:
        raise ValueError(f"cannot load the evaluator {spec!r}: {exc}") from exc
    takes_task = positional_params(target) >= 2  # (task, trajectory) rather than only the trajectory

    def evaluate(rollout: Rollout, trajectory: Trajectory) -> Any:
        return target(rollout.task, trajectory) if takes_task else target(trajectory)

    evaluate.__qualname__ = str(getattr(target, "__qualname__", spec))
    return evaluate


def source_scorer(spec: dict[str, str]) -> Evaluator:
    """{source: NAME}: the source's score(task, answer) of the last call's answer, the task as the server stored it."""
    if set(spec) != {"source"}:
        raise ValueError(f"an evaluator mapping takes one key, source: NAME (a task source); got {sorted(spec)}")
    scorer = load_scorer(spec["source"])

    def evaluate(rollout: Rollout, trajectory: Trajectory) -> float:
        return scorer.score(rollout.task, trajectory.final_output.text)

    evaluate.__qualname__ = f"source {spec['source']}"
    return evaluate


def agent_outcome(finish: AttemptFinish) -> bool:
    """The attempt ended as the agent's own doing: it succeeded or failed the task (not timeout or infra)."""
    return finish.status == "succeeded" or finish.failure_kind in (None, FailureKind.TASK)


class CheckCommand:
    """A check command as an evaluator: runs in the attempt's working directory, scored by its output."""

    def __init__(self, argv: list[str]) -> None:
        self.argv = argv
        self.__qualname__ = f"check {' '.join(argv)}"[:200]

    def __call__(self, rollout: Rollout, trajectory: Trajectory) -> Any:
        cwd = rollout.runner.cwd if rollout.runner is not None else None
        stdin = json.dumps({"task": rollout.task, "trajectory": trajectory.model_dump(mode="json")})
        env = {**os.environ, envvars.ALIGHT_TASK: json.dumps(rollout.task), envvars.ALIGHT_ROLLOUT_ID: rollout.id}
        try:
            done = subprocess.run(
                self.argv, cwd=cwd, env=env, input=stdin, capture_output=True, text=True, timeout=CHECK_TIMEOUT_S
            )
        except OSError as exc:
            raise ValueError(f"cannot run the evaluator command {self.argv[0]!r} in {cwd!r}: {exc}") from exc
        except subprocess.TimeoutExpired as exc:
            raise ValueError(f"the evaluator command ran past {CHECK_TIMEOUT_S:g} s; no reward recorded") from exc
        lines = [line for line in done.stdout.splitlines() if line.strip()]
        if lines:
            with contextlib.suppress(ValueError):  # ordinary output (a test runner's summary): the exit status decides
                return json.loads(lines[-1])
        return 1.0 if done.returncode == 0 else 0.0


def rewards_from(result: Any, rollout_id: str, attempt: int) -> list[RewardCreate]:
    """The reward rows an evaluator's return value stands for; ValueError for anything but numbers."""
    if result is None:
        return []
    items = result.items() if isinstance(result, dict) else [(None, result)]
    rows = []
    for name, value in items:
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise ValueError(
                f"evaluator returned {value!r} for {name or 'the reward'} of rollout {rollout_id!r}; "
                "return a finite number, a dict of them, or None"
            )
        # Deterministic ids: a retried finish (or a second call) stores nothing new.
        suffix = "" if name is None else f"-{name}"
        rows.append(
            RewardCreate(
                id=f"eval-{attempt}{suffix}"[:200],
                attempt=attempt,
                value=float(value),
                name=None if name is None else str(name),
                final=True,
                source=RewardSource.EVALUATOR,
            )
        )
    return rows


def evaluator_hook(evaluate: Evaluator) -> Callable[[Store, Rollout, int, AttemptFinish], None]:
    """Wrap an evaluator as an attempt-finished hook that stores its rewards (agent outcomes only)."""

    def hook(store: Store, rollout: Rollout, attempt: int, finish: AttemptFinish) -> None:
        if not agent_outcome(finish):
            return
        trajectory = build_trajectory(store, rollout.id, attempt).model_copy(
            update={"attempt_status": AttemptStatus(finish.status), "failure_kind": finish.failure_kind}
        )
        score_attempt(store, rollout, trajectory, evaluate)

    hook.__qualname__ = f"evaluator({getattr(evaluate, '__qualname__', evaluate)!s})"
    return hook


def score_attempt(store: Store, rollout: Rollout, trajectory: Trajectory, evaluate: Evaluator) -> None:
    """Store the rewards `evaluate` gives the attempt's trajectory (awaited when it is a coroutine)."""
    result = evaluate(rollout, trajectory)
    if inspect.isawaitable(result):
        result = asyncio.run(awaited(result))
    for reward in rewards_from(result, rollout.id, trajectory.attempt):
        store.add_reward(rollout.id, reward)


def install_evaluator(app: FastAPI, config: ServerConfig) -> None:
    """Register config.evaluator (if any) as an attempt-finished hook of `app`, and config.environment's server."""
    if config.evaluator is not None:
        app.state.attempt_finished_hooks.append(evaluator_hook(load_evaluator(config.evaluator)))
    if config.environment is not None:  # its plugin adds the attempt's MCP route and the hook that posts its score
        install = (
            "environment.mcp {name!r} is not installed; installed: {installed} "
            "(pip install -e 'environments[scienceworld]', docs/environments.md)"
        )
        plugin("alight.environments", str(config.environment.get("mcp")), install)(app, config.environment)
