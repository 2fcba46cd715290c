"""Offline rollouts (imported traces) in the store: created ended, never claimable, idempotent per id."""

from __future__ import annotations

import pytest

from alight.schemas import AttemptStatus, RolloutCreate, RolloutState
from alight_server.store.base import Conflict
from alight_server.store.sql import SqlStore


def test_an_offline_rollout_is_stored_ended_with_one_attempt_and_is_never_claimed(any_store: SqlStore) -> None:
    any_store.create_rollouts([RolloutCreate(id="live", task={"q": 1})])
    [(rollout, created)] = any_store.add_offline_rollouts([RolloutCreate(id="prod-1", task={"prompt": "hi"})])
    assert created and rollout.state == RolloutState.SUCCEEDED and rollout.task == {"prompt": "hi"}
    assert [(a.attempt, a.status, a.runner_handle) for a in rollout.attempts] == [
        (1, AttemptStatus.SUCCEEDED, "offline/prod-1/1")
    ]
    assert [r.id for r, _ in any_store.claim_attempts(10)] == ["live"]
    assert any_store.claim_attempts(10) == []
    assert any_store.get_rollout("prod-1").state == RolloutState.SUCCEEDED


def test_adding_the_same_offline_rollout_again_changes_nothing(any_store: SqlStore) -> None:
    item = RolloutCreate(id="prod-1", task={"prompt": "hi"}, metadata={"offline": {"format": "otel"}})
    [(first, _)] = any_store.add_offline_rollouts([item])
    [(again, created)] = any_store.add_offline_rollouts([item])
    assert not created and again == first


def test_an_offline_id_taken_by_other_content_is_a_conflict(any_store: SqlStore) -> None:
    any_store.add_offline_rollouts([RolloutCreate(id="prod-1", task={"prompt": "a"})])
    with pytest.raises(Conflict, match="prod-1"):
        any_store.add_offline_rollouts([RolloutCreate(id="prod-1", task={"prompt": "b"})])
