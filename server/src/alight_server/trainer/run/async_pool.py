"""Asynchronous rollouts: task groups in flight across steps; a step takes the first complete, fresh ones.

The groups a step does not take carry over across the weight update (docs/training.md#asynchronous-training). A
group trains whole or not at all: one with a rollout that timed out, was cancelled or failed for infrastructure
is dropped and replaced, never filled with zeros. Staleness is the trainer's version minus the oldest version
among the group's calls; with several policies it is counted per policy (`updates_between`), so another policy's
updates never age P's rows. With `judge:` a group is judged in the background once its last rollout ends
(trainer/run/judging.py); one still judged after the judge's bound is given up, so a step never waits longer."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from typing import Any

from alight.client import AlightClient
from alight.schemas import Mode, PolicyVersion, Rollout, Trajectory
from alight_server.policies.versions import updates_between
from alight_server.trainer.config.run import TrainConfig
from alight_server.trainer.run.dataset import TaskCursor
from alight_server.trainer.run.judging import Judging
from alight_server.trainer.run.rollouts import RolloutPhase, collect, create_group_rollouts, poll_done
from alight_server.trainer.step.policy_samples import call_policy


@dataclass
class Group:
    """One task's rollouts; `phase` is set once all of them ended."""

    number: int  # the n-th group of the run
    task: Any
    created_step: int
    group_id: str = ""
    ids: list[str] = field(default_factory=list)
    finished: dict[str, Rollout] = field(default_factory=dict)
    phase: RolloutPhase | None = None
    oldest_version: int = 0  # oldest policy version among its calls (or its rollouts' creation versions)
    oldest_by_policy: dict[str, int] = field(default_factory=dict[str, int])  # several policies: each one's own
    judging: Future[RolloutPhase] | None = None  # its judgement in flight (`judge:`)
    judging_since: float = 0.0


@dataclass
class Taken:
    """A step's groups and what the pool did to get them."""

    groups: list[Group]
    weights: dict[str, float]  # group id -> loss weight (1 unless down-weighted)
    staleness: list[int]  # per group taken
    metrics: dict[str, float]
    # several policies: policy -> group id -> loss weight of that policy's rows (None with one policy)
    policy_weights: dict[str, dict[str, float]] | None = None


def group_prefix(run_id: str, number: int) -> str:
    return f"{run_id}-g{number:06d}"


def oldest_version(trajectories: list[Trajectory], rollouts: list[Rollout]) -> int:
    """The oldest policy version that served any call of the group; creation versions when there is no call."""
    versions = [c.call.policy_version for t in trajectories for c in t.calls if c.call.policy_version is not None]
    return min(versions) if versions else min((r.policy_version for r in rollouts), default=0)


def oldest_versions_by_policy(trajectories: list[Trajectory], rollouts: list[Rollout]) -> dict[str, int]:
    """Each policy with calls in the group -> the oldest version that served one of them (the rollouts' creation
    version where its calls carry none). A call of no single policy trains none (policy_samples) and ages none."""
    versions: dict[str, list[int]] = {}
    for tc in (tc for t in trajectories for tc in t.calls):
        try:
            name = call_policy(tc.call)
        except ValueError:
            continue
        if name is not None:
            versions.setdefault(name, []).extend([] if tc.call.policy_version is None else [tc.call.policy_version])
    created = min((r.policy_version for r in rollouts), default=0)
    return {name: min(found, default=created) for name, found in versions.items()}


def own_staleness(group: Group, history: list[PolicyVersion], version: int) -> dict[str, int]:
    """Policy -> how many of its own updates came after its oldest call in the group, up to `version`."""
    return {name: updates_between(history, name, oldest, version) for name, oldest in group.oldest_by_policy.items()}


def stale_weight(staleness: int, max_staleness: int) -> float:
    """A row's loss weight: 1 up to `max_staleness`, then 1 / (1 + staleness - max_staleness)."""
    return 1.0 / (1 + staleness - max_staleness) if staleness > max_staleness else 1.0


class GroupPool:
    """The training groups in flight (see the module docstring). `state()` goes into each checkpoint."""

    def __init__(
        self,
        client: AlightClient,
        config: TrainConfig,
        run_id: str,
        cursor: TaskCursor,
        metadata: dict[str, Any],
        poll_s: float = 0.25,
        judging: Judging | None = None,
    ) -> None:
        self.client, self.config, self.run_id, self.cursor = client, config, run_id, cursor
        self.policies = list(config.policies)  # several policies: staleness per policy; [] with one
        self.metadata = metadata
        self.poll_s = poll_s
        self.judging = judging
        self.groups: list[Group] = []
        self.next_number = 0
        self.used: list[tuple[int, str, int]] = []  # (step, group id, staleness) of each group trained on

    def state(self) -> dict[str, Any]:
        groups = [{"number": g.number, "task": g.task, "created_step": g.created_step} for g in self.groups]
        return {"next_number": self.next_number, "groups": groups}

    def restore(self, state: dict[str, Any]) -> None:
        """Continue the groups a checkpoint had in flight: the same ids, so none starts again."""
        self.next_number = int(state["next_number"])
        self.groups = [Group(int(g["number"]), g["task"], int(g["created_step"])) for g in state["groups"]]
        for group in self.groups:
            self._create(group)

    def take(self, step: int, version: int, on_progress: Callable[[str], None] | None = None) -> Taken:
        """Wait until `tasks_per_step` usable groups are complete; return the oldest of them."""
        pool = self.config.async_rollout
        wanted = self.config.tasks_per_step
        started = time.monotonic()
        carried_in = sum(g.created_step < step for g in self.groups)  # started by an earlier step
        counts = {"dropped_stale": 0, "dropped_infra": 0}
        history = self.client.policy().versions if self.policies else []

        def staleness_of(group: Group) -> int:
            if not self.policies:
                return version - group.oldest_version
            return max(own_staleness(group, history, version).values(), default=0)

        while True:
            self.top_up(step)
            for group in [g for g in self.groups if g.phase is not None]:
                if pool.stale == "drop" and staleness_of(group) > pool.max_staleness:
                    self.groups.remove(group)
                    counts["dropped_stale"] += 1
            ready = [g for g in self.groups if g.phase is not None]
            if len(ready) >= wanted:
                break
            counts["dropped_infra"] += self._poll()
            if on_progress is not None:
                running = sum(len(g.ids) - len(g.finished) for g in self.groups)
                on_progress(f"rollouts: {len(ready)}/{wanted} groups complete, {running} rollouts running")
        taken = sorted(ready, key=lambda g: g.number)[:wanted]
        for group in taken:
            self.groups.remove(group)
        staleness = [max(0, staleness_of(g)) for g in taken]
        self.used += [(step + 1, g.group_id, s) for g, s in zip(taken, staleness, strict=True)]
        weights = {g.group_id: stale_weight(s, pool.max_staleness) for g, s in zip(taken, staleness, strict=True)}
        metrics: dict[str, float] = {
            "async/carry_over_in": float(carried_in),
            "async/carry_over_out": float(len(self.groups)),
            "async/groups_used": float(len(taken)),
            "async/oldest_carry_over_age": float(max((step - g.created_step for g in self.groups), default=0)),
            "async/dropped_stale": float(counts["dropped_stale"]),
            "async/dropped_infra": float(counts["dropped_infra"]),
            "async/staleness_mean": sum(staleness) / len(staleness),
            "async/staleness_max": float(max(staleness)),
            "async/downweighted": float(sum(w < 1 for w in weights.values())),
            "time/wait_s": time.monotonic() - started,
            **{f"async/staleness_{s}": float(staleness.count(s)) for s in range(max(staleness) + 1)},
        }
        by_policy = self._per_policy(taken, history, version, metrics) if self.policies else None
        return Taken(taken, weights, staleness, metrics, by_policy)

    def _per_policy(
        self, taken: list[Group], history: list[PolicyVersion], version: int, metrics: dict[str, float]
    ) -> dict[str, dict[str, float]]:
        """Each policy's row weights by group, and its `policy/<name>/async/staleness_mean|max` (over the groups
        holding its calls) added to `metrics`."""
        own = {g.group_id: own_staleness(g, history, version) for g in taken}
        weights: dict[str, dict[str, float]] = {}
        bound = self.config.async_rollout.max_staleness
        for name in self.policies:
            ages = {group: s[name] for group, s in own.items() if name in s}
            weights[name] = {group: stale_weight(s, bound) for group, s in ages.items()}
            if ages:
                metrics[f"policy/{name}/async/staleness_mean"] = sum(ages.values()) / len(ages)
                metrics[f"policy/{name}/async/staleness_max"] = float(max(ages.values()))
        return weights

    def top_up(self, step: int) -> None:
        """Start new groups (`step`: the step whose collection they belong to) until `active_groups` are in flight."""
        while len(self.groups) < self.config.async_rollout.active_groups:
            (task,) = self.cursor.take(1)
            group = Group(self.next_number, task, step)
            self.next_number += 1
            self._create(group)
            self.groups.append(group)

    def _create(self, group: Group) -> None:
        cfg = self.config
        created = create_group_rollouts(
            self.client, group_prefix(self.run_id, group.number), [group.task], cfg.group_size, Mode.TRAIN,
            cfg.agent, cfg.rollout_timeout_s, cfg.max_attempts, {**self.metadata, "step": group.created_step},
        )  # fmt: skip
        group.ids, group.group_id = [r.id for r in created], created[0].group_id or ""

    def _poll(self) -> int:
        """One long-poll over the running rollouts; collects groups that completed. Returns how many were dropped."""
        dropped = self._judged()
        running = [g for g in self.groups if g.phase is None and g.judging is None]
        pending = [i for g in running for i in g.ids if i not in g.finished]
        if not pending:
            in_flight = [g.judging for g in self.groups if g.judging is not None]
            if in_flight:  # only judgements left to wait for: wake when one ends
                wait(in_flight, timeout=self.poll_s, return_when=FIRST_COMPLETED)
            return dropped
        done = {r.id: r for r in poll_done(self.client, pending[:500], self.poll_s)}
        for group in running:
            group.finished.update({i: done[i] for i in group.ids if i in done})
            if len(group.finished) < len(group.ids):
                continue
            phase = collect(self.client, [group.finished[i] for i in group.ids], time.monotonic())
            if self.judging is not None and not (phase.infra or phase.timeout or phase.cancelled):
                group.judging, group.judging_since = self.judging.submit(phase), time.monotonic()
                continue
            dropped += self._complete(group, phase)
        return dropped

    def _judged(self) -> int:
        """Take in the judgements that ended; give up those past the judge's bound. Returns the groups dropped."""
        dropped = 0
        for group in [g for g in self.groups if g.judging is not None]:
            assert group.judging is not None and self.judging is not None
            if group.judging.done():
                phase, group.judging = group.judging.result(), None
                dropped += self._complete(group, phase)
            elif time.monotonic() - group.judging_since > self.judging.bound_s:
                self.groups.remove(group)  # an update never waits on a judgement past its bound
                dropped += 1
        return dropped

    def _complete(self, group: Group, phase: RolloutPhase) -> int:
        """Make `group` usable with its finished `phase`, or drop it (1) when part of it failed for infrastructure."""
        if phase.infra or phase.timeout or phase.cancelled:
            self.groups.remove(group)  # never trained on part of a group, never on zero-filled rewards
            return 1
        group.phase = phase
        group.oldest_version = oldest_version(phase.trajectories, phase.rollouts)
        if self.policies:
            group.oldest_by_policy = oldest_versions_by_policy(phase.trajectories, phase.rollouts)
        return 0
