"""Flagged work never trains unreviewed: the review queue's side of each training step (`review:`,
docs/security.md#review-flags).

`quarantine` holds a group with a pending rollout whole, because a rollout's advantage is relative to its group:
it trains whole once decided, never a part now and the rest later. A rejected rollout's task joins the run's
regression tasks. The held groups, the queue and the audit counts are checkpointed."""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from alight.client import AlightClient
from alight.schemas import REVIEW_DECISION, REVIEW_REQUESTED, EventCreate, ReviewRequest, Rollout, Trajectory
from alight_server.trainer.config.run import TrainConfig
from alight_server.trainer.run.async_pool import oldest_version
from alight_server.trainer.run.rollouts import RolloutPhase, collect
from alight_server.trainer.step.integrity import audited, integrity_metrics, passed_every_gate, review_flagged

REGRESSIONS = "regressions.jsonl"  # in the run dir: one line per rejected rollout, its task a regression task
# Counted per step as integrity/<name> (rollouts): newly audited, released from an earlier step, dropped as too
# stale, left out by `flags: drop`, and seen rejected.
COUNTED = ("audited", "released", "dropped_stale", "review_dropped", "rejected")
POLL_PER_STEP = 128  # queued rollouts asked for a decision per step: a bounded cost whatever the queue's length


@dataclass
class Queued:
    """A queued rollout the trainer waits to see decided."""

    reason: str  # "flag" (a gate's review flag) or "audit"
    task: Any
    state: str = "pending"


@dataclass
class HeldGroup:
    """A group held out of training while one of its rollouts is pending."""

    group_id: str
    ids: list[str]
    oldest_version: int  # the oldest policy version among its calls: what its staleness counts from
    held_at: int  # the step that held it


@dataclass
class Screened:
    """The step's trajectories to train on (its own and the released ones), their rollouts, and the metrics."""

    trajectories: list[Trajectory]
    rollouts: list[Rollout]
    metrics: dict[str, float] = field(default_factory=dict[str, float])


class RegressionLog:
    """`regressions.jsonl`: each rejected rollout once (a resumed run that sees it again adds nothing)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        lines = path.read_text().splitlines() if path.is_file() else []
        self.recorded = {json.loads(line)["rollout_id"] for line in lines if line.strip()}

    def record(self, rollout_id: str, queued: Queued, step: int) -> None:
        if rollout_id in self.recorded:
            return
        self.recorded.add(rollout_id)
        line = {"rollout_id": rollout_id, "reason": queued.reason, "step": step, "task": queued.task}
        with self.path.open("a") as out:
            out.write(json.dumps(line) + "\n")


def regression_tasks(run_dir: Path) -> list[Any]:
    """The run's regression tasks: the task of each rollout a person rejected, in the order they were rejected."""
    path = run_dir / REGRESSIONS
    lines = path.read_text().splitlines() if path.is_file() else []
    return [json.loads(line)["task"] for line in lines if line.strip()]


class Quarantine:
    """The review queue's side of the run (see the module docstring). `state()` goes into each checkpoint."""

    def __init__(self, client: AlightClient, config: TrainConfig, run_dir: Path) -> None:
        self.client, self.review, self.seed = client, config.review, config.seed
        bound = config.review.max_staleness
        self.max_staleness = config.async_rollout.max_staleness if bound is None else bound
        self.queued: dict[str, Queued] = {}  # undecided, the one asked longest ago first
        self.held: list[HeldGroup] = []
        self.audits = Counter[str]()  # accepted / rejected audits, over the run
        self.regressions = RegressionLog(run_dir / REGRESSIONS)

    def state(self) -> dict[str, Any]:
        return {
            "queued": {rid: asdict(q) for rid, q in self.queued.items()},
            "held": [asdict(g) for g in self.held],
            "audits": dict(self.audits),
        }

    def restore(self, state: dict[str, Any]) -> None:
        self.queued = {rid: Queued(**q) for rid, q in state["queued"].items()}
        self.held = [HeldGroup(**g) for g in state["held"]]
        self.audits = Counter[str](state["audits"])

    def screen(self, phase: RolloutPhase, step: int, version: int) -> Screened:
        """Step `step + 1`'s rollouts as training should see them, while the trainer holds policy `version`."""
        counts = Counter[str]()
        self._poll(step, counts)
        released = self._release(version, counts)
        fresh = [self._audit(t, counts) for t in phase.trajectories]
        for trajectory in fresh:
            if trajectory.review != "clear":
                self._queue(trajectory, step, counts)
        kept = self._by_mode(fresh, phase.rollouts, step, counts)
        metrics = {
            **integrity_metrics(phase.trajectories),
            "integrity/quarantined": float(sum(i in self.queued for g in self.held for i in g.ids)),
            "integrity/held_groups": float(len(self.held)),
            **{f"integrity/{name}": float(counts[name]) for name in COUNTED},
        }
        decided = self.audits["accepted"] + self.audits["rejected"]
        if decided:
            metrics["integrity/audit_rejected"] = self.audits["rejected"] / decided
            metrics["integrity/audits_decided"] = float(decided)
        return Screened(kept + released.trajectories, phase.rollouts + released.rollouts, metrics)

    def _queue(self, trajectory: Trajectory, step: int, counts: Counter[str]) -> None:
        self.queued[trajectory.rollout_id] = Queued("flag" if review_flagged(trajectory) else "audit", trajectory.task)
        if trajectory.review != "pending":  # decided before the step took it
            self._decided(trajectory.rollout_id, trajectory.review, step, counts)

    def _decided(self, rollout_id: str, state: str, step: int, counts: Counter[str]) -> None:
        """A queued rollout's decision seen: counted, a rejected one recorded, and no longer asked about."""
        queued = self.queued.pop(rollout_id)
        if queued.reason == "audit":
            self.audits[state] += 1
        if state == "rejected":
            counts["rejected"] += 1
            self.regressions.record(rollout_id, queued, step)

    def _poll(self, step: int, counts: Counter[str]) -> None:
        for rollout_id in list(self.queued)[:POLL_PER_STEP]:
            decisions = self.client.list_events(rollout_id, kind=REVIEW_DECISION, reveal=True)
            if not decisions:
                self.queued[rollout_id] = self.queued.pop(rollout_id)  # asked again after the others
                continue
            state = "accepted" if decisions[0].payload.get("decision") == "accept" else "rejected"
            self._decided(rollout_id, state, step, counts)

    def _audit(self, trajectory: Trajectory, counts: Counter[str]) -> Trajectory:
        """The trajectory, queued for review (pending) when the audit draws it from what passed every gate."""
        if not passed_every_gate(trajectory) or not audited(trajectory.rollout_id, self.seed, self.review.audit_share):
            return trajectory
        request = EventCreate(
            id=f"audit-{trajectory.rollout_id}",  # a resumed run writing it again adds nothing
            kind=REVIEW_REQUESTED,
            payload=ReviewRequest(reason="audit").model_dump(),
        )
        self.client.add_event(trajectory.rollout_id, request)
        counts["audited"] += 1
        return trajectory.model_copy(update={"review": "pending"})

    def _by_mode(
        self, trajectories: list[Trajectory], rollouts: list[Rollout], step: int, counts: Counter[str]
    ) -> list[Trajectory]:
        """What trains of the step's own trajectories under `review.flags`; quarantine holds groups with a
        pending rollout (to `self.held`)."""
        mode = self.review.flags
        if mode == "train":
            return trajectories
        if mode == "drop":
            kept = [t for t in trajectories if t.review == "clear"]
            counts["review_dropped"] += len(trajectories) - len(kept)
            return kept
        groups: dict[str, list[Trajectory]] = {}
        for trajectory in trajectories:
            groups.setdefault(trajectory.group_id or trajectory.rollout_id, []).append(trajectory)
        kept: list[Trajectory] = []
        for group_id, members in groups.items():
            if any(t.review == "pending" for t in members):
                ids = {t.rollout_id for t in members}
                version = oldest_version(members, [r for r in rollouts if r.id in ids])
                self.held.append(HeldGroup(group_id, [t.rollout_id for t in members], version, step))
            else:
                kept += [t for t in members if t.review != "rejected"]
        return kept

    def _release(self, version: int, counts: Counter[str]) -> Screened:
        """The held groups decided since: their trajectories read again (rejected ones left out); the groups
        past the staleness bound dropped (their queued rollouts still watched, so a rejection is recorded)."""
        released = Screened([], [])
        for group in list(self.held):
            if version - group.oldest_version > self.max_staleness:
                self.held.remove(group)
                counts["dropped_stale"] += len(group.ids)
            elif not any(i in self.queued for i in group.ids):
                rollouts = [self.client.get_rollout(i) for i in group.ids]
                phase = collect(self.client, rollouts, time.monotonic())
                if any(t.review == "pending" for t in phase.trajectories):
                    continue  # decided, then queued again (an audit request written late): wait
                self.held.remove(group)
                kept = [t for t in phase.trajectories if t.review != "rejected"]
                counts["released"] += len(kept)
                released.trajectories += kept
                released.rollouts += rollouts
        return released
