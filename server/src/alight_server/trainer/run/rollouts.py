"""Rollout phase of a step: create n rollouts per task as groups, wait for them, fetch their trajectories."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from alight.client import AlightClient
from alight.evaluation import mean_and_error, scores_by_task
from alight.schemas import FailureKind, Mode, Rollout, RolloutCreate, RolloutState, RunnerSpec, Trajectory


@dataclass
class RolloutPhase:
    """What one batch of rollouts produced."""

    rollouts: list[Rollout]
    trajectories: list[Trajectory]
    seconds: float
    generated_tokens: int = 0
    failed: int = 0
    cancelled: int = 0
    missing_reward: int = 0  # ended as the agent's own outcome, but nothing scored it
    timeout: int = 0  # ran out of time or infrastructure failed: never scored, never in the reward metrics
    infra: int = 0
    # Final rewards of the rollouts that ended as the agent's own outcome and have one.
    rewards: list[float] = field(default_factory=list)

    def no_reward_hint(self) -> str | None:
        """What to fix when no rollout that the agent finished got a reward; None when some did."""
        if self.rewards or not self.missing_reward:
            return None
        return (
            f"none of the {self.missing_reward} finished rollouts has a reward, so there is nothing to learn: "
            "return a number from the @alight.rollout function, call alight.reward(value), or set `evaluator:` "
            "in the train config (docs/zero-change.md)"
        )


@dataclass
class Progress:
    """Counts while waiting, for the display."""

    total: int
    finished: int
    failed: int

    def __str__(self) -> str:
        return f"{self.finished}/{self.total} rollouts done, {self.total - self.finished} running, {self.failed} failed"


def create_group_rollouts(
    client: AlightClient,
    prefix: str,
    tasks: Sequence[Any],
    group_size: int,
    mode: Mode,
    runner: RunnerSpec,
    timeout_s: float,
    max_attempts: int,
    metadata: dict[str, Any],
) -> list[Rollout]:
    """`group_size` rollouts per task, one group per task. Ids are deterministic, so re-creating is harmless."""
    items = [
        RolloutCreate(
            id=f"{prefix}-t{i:03d}-k{k:02d}",
            task=task,
            mode=mode,
            group_id=f"{prefix}-t{i:03d}",
            runner=runner,
            timeout_s=timeout_s,
            max_attempts=max_attempts,
            metadata={**metadata, "task_index": i},
        )
        for i, task in enumerate(tasks)
        for k in range(group_size)
    ]
    return client.create_rollouts(items)


log = logging.getLogger("alight.trainer")

# A server too loaded to answer a long-poll in time (seen at load ~20 on 2 cores) is asked again this many
# times in a row before the run fails: the wait only reads, so asking again loses and repeats nothing.
SLOW_SERVER_RETRIES = 5


def poll_done(
    client: AlightClient, ids: Sequence[str], poll_s: float, retries: int = SLOW_SERVER_RETRIES
) -> list[Rollout]:
    """One long-poll: the rollouts of `ids` that are final; a server that did not answer in time is asked again."""
    for attempt in range(retries):
        try:
            return client.wait_rollouts(ids, timeout_s=poll_s).done
        except httpx.ReadTimeout:
            log.warning("the server did not answer a rollout wait in time (try %d of %d); asking again",
                        attempt + 1, retries + 1)  # fmt: skip
    return client.wait_rollouts(ids, timeout_s=poll_s).done  # the last try: a timeout now fails the run


def wait_all(
    client: AlightClient,
    ids: Sequence[str],
    on_progress: Callable[[Progress], None] | None = None,
    poll_s: float = 2.0,
    on_unclaimed: Callable[[float], None] | None = None,
    unclaimed_after_s: float = 30.0,
) -> list[Rollout]:
    """Long-poll until every rollout is terminal, reporting progress between polls. `on_unclaimed(seconds)` is
    called once when none has finished and the first is still queued after `unclaimed_after_s`: no controller is
    claiming attempts, and the run would otherwise wait silently."""
    finished: dict[str, Rollout] = {}
    pending = list(ids)
    started = time.monotonic()
    warned = on_unclaimed is None
    while pending:
        # Ask in chunks the API accepts; a short timeout keeps the display moving.
        finished.update((rollout.id, rollout) for rollout in poll_done(client, pending[:500], poll_s))
        pending = [i for i in pending if i not in finished]
        if on_progress is not None:
            failed = sum(r.state in (RolloutState.FAILED, RolloutState.CANCELLED) for r in finished.values())
            on_progress(Progress(total=len(ids), finished=len(finished), failed=failed))
        waited = time.monotonic() - started
        if not warned and pending and not finished and waited > unclaimed_after_s:
            warned = True
            if client.get_rollout(pending[0]).state == RolloutState.QUEUED:
                assert on_unclaimed is not None
                on_unclaimed(waited)
    return [finished[i] for i in ids]


def collect(client: AlightClient, rollouts: list[Rollout], started: float) -> RolloutPhase:
    """Fetch each finished rollout's trajectory (its latest attempt) and count what happened (`tally`)."""
    # training data: the exact copy
    trajectories = [client.trajectory(r.id, reveal=True) for r in rollouts if r.state != RolloutState.CANCELLED]
    return tally(rollouts, trajectories, time.monotonic() - started)


def tally(rollouts: list[Rollout], trajectories: list[Trajectory], seconds: float) -> RolloutPhase:
    """`rollouts` and their (not cancelled ones') trajectories counted; timeouts and infra failures by kind,
    whatever reward they may carry: only the agent's own outcomes count towards the rewards."""
    phase = RolloutPhase(rollouts=rollouts, trajectories=trajectories, seconds=seconds)
    phase.cancelled = sum(r.state == RolloutState.CANCELLED for r in rollouts)
    phase.failed = sum(r.state == RolloutState.FAILED for r in rollouts)
    for trajectory in trajectories:
        phase.generated_tokens += sum(len(c.call.response_token_ids) for c in trajectory.calls)
        if trajectory.failure_kind in (FailureKind.TIMEOUT, FailureKind.INFRA):
            phase.timeout += trajectory.failure_kind == FailureKind.TIMEOUT
            phase.infra += trajectory.failure_kind == FailureKind.INFRA
        elif trajectory.final_reward is None:
            phase.missing_reward += 1
        else:
            phase.rewards.append(trajectory.final_reward)
    return phase


def score_and_error(trajectories: list[Trajectory]) -> tuple[float, float]:
    """Mean validation score and its standard error clustered by task (`mean_and_error`); NaN when none scored."""
    return mean_and_error(scores_by_task(trajectories))
