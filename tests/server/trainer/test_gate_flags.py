"""Gate flags arrive with the trajectory: the trainer's filter leaves a flagged rollout out, asking nothing more."""

from __future__ import annotations

import time
from typing import Any

import httpx

from alight.client import AlightClient
from alight.schemas import (
    REVIEW_DECISION,
    REVIEW_FLAG,
    REVIEW_REQUESTED,
    REWARD_HACKING,
    AttemptFinish,
    EventCreate,
    GateFlag,
    Mode,
    RewardCreate,
    Rollout,
    RolloutCreate,
)
from alight_server.trainer.run.rollouts import collect
from alight_server.trainer.step.filters import filter_for_training
from alight_server.trainer.step.samples import SampleConfig


def finished(client: AlightClient, live_server: Any) -> list[Rollout]:
    """Three rewarded training rollouts: the second a hard gate flagged, the third a review flag marked."""
    created = client.create_rollouts([RolloutCreate(task={"i": i}, mode=Mode.TRAIN) for i in range(3)])
    ids = [r.id for r in created]
    for start in client.claim_attempts(limit=3, ids=ids):
        client.add_reward(start.rollout.id, RewardCreate(attempt=start.attempt, value=1.0, final=True))
        client.finish_attempt(start.rollout.id, start.attempt, AttemptFinish(status="succeeded"))
    for rid, kind, rule in [(ids[1], REWARD_HACKING, "test_file_modified"), (ids[2], REVIEW_FLAG, "long_answer")]:
        live_server.store.add_event(rid, EventCreate(kind=kind, attempt=1, payload={"rule": rule, "evidence": "x"}))
    return [client.get_rollout(rid) for rid in ids]


def test_a_rollout_a_gate_flagged_arrives_flagged_and_is_left_out_of_training(client, live_server):
    rollouts = finished(client, live_server)
    phase = collect(client, rollouts, time.monotonic())
    assert [t.gate_flags for t in phase.trajectories] == [
        [],
        [GateFlag(kind=REWARD_HACKING, rule="test_file_modified", attempt=1)],
        [GateFlag(kind=REVIEW_FLAG, rule="long_answer", attempt=1)],
    ]
    kept, metrics = filter_for_training(phase.trajectories, SampleConfig())
    assert [t.rollout_id for t in kept] == [rollouts[0].id, rollouts[2].id]  # a review flag keeps the reward
    assert metrics["filter/gate_flagged"] == 1.0


def test_reading_and_filtering_a_step_asks_one_trajectory_per_rollout_and_no_events(client, live_server):
    rollouts = finished(client, live_server)
    asked: list[str] = []

    def count(request: httpx.Request) -> None:
        asked.append(request.url.path)

    client.http.event_hooks = {"request": [count]}
    phase = collect(client, rollouts, time.monotonic())
    kept, _ = filter_for_training(phase.trajectories, SampleConfig())
    assert len(kept) == 2
    assert asked == [f"/api/rollouts/{r.id}/trajectory" for r in rollouts]


def test_a_review_flag_makes_the_trajectory_pending_until_a_person_decides(client, live_server):
    rollouts = finished(client, live_server)
    ids = [r.id for r in rollouts]
    reviews = [t.review for t in collect(client, rollouts, time.monotonic()).trajectories]
    assert reviews == ["clear", "clear", "pending"]  # a hard gate's violation is 0, never queued
    decision = {"decision": "accept", "reviewer": "ana", "note": ""}
    live_server.store.add_event(ids[2], EventCreate(kind=REVIEW_DECISION, payload=decision))
    live_server.store.add_event(ids[0], EventCreate(kind=REVIEW_REQUESTED, payload={"reason": "audit"}))
    reviews = [t.review for t in collect(client, rollouts, time.monotonic()).trajectories]
    assert reviews == ["pending", "clear", "accepted"]
