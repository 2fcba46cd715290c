"""Store contract: rollouts, the state machine, cursors."""

from __future__ import annotations

import threading

import pytest

from alight.api_models import RolloutQuery
from alight.schemas import Mode, RolloutCreate, RolloutState
from alight_server.store import Conflict, NotFound
from alight_server.store.sql import SqlStore


def test_create_gives_a_queued_rollout_with_a_generated_id(any_store: SqlStore) -> None:
    (r,) = any_store.create_rollouts([RolloutCreate(task={"q": "2+2"}, group_id="g1")])
    assert r.id and r.state == RolloutState.QUEUED
    assert r.task == {"q": "2+2"} and r.group_id == "g1" and r.mode == Mode.TRAIN
    assert r.policy_version == 0 and r.attempts == [] and r.seq > 0
    assert any_store.get_rollout(r.id) == r


def test_retried_create_with_same_id_and_body_returns_the_stored_rollout(any_store: SqlStore) -> None:
    item = RolloutCreate(id="r-1", task=[1, 2, 3], metadata={"k": "v"})
    (first,) = any_store.create_rollouts([item])
    (again,) = any_store.create_rollouts([item])
    assert again == first
    assert len(any_store.list_rollouts()) == 1


def test_same_id_with_a_different_body_is_a_conflict(any_store: SqlStore) -> None:
    any_store.create_rollouts([RolloutCreate(id="r-1", task="a")])
    with pytest.raises(Conflict, match="r-1"):
        any_store.create_rollouts([RolloutCreate(id="r-1", task="b")])


def test_a_batch_keeps_its_order_and_tolerates_a_repeated_item(any_store: SqlStore) -> None:
    items = [RolloutCreate(id=f"r-{i}", task=i) for i in (3, 1, 2)] + [RolloutCreate(id="r-3", task=3)]
    out = any_store.create_rollouts(items)
    assert [r.id for r in out] == ["r-3", "r-1", "r-2", "r-3"]


def test_unknown_rollout_is_not_found(any_store: SqlStore) -> None:
    with pytest.raises(NotFound, match="nope"):
        any_store.get_rollout("nope")
    with pytest.raises(NotFound):
        any_store.transition("nope", RolloutState.CANCELLED)


def test_list_filters_by_state_mode_group_and_ids(any_store: SqlStore) -> None:
    any_store.create_rollouts(
        [
            RolloutCreate(id="a", group_id="g1"),
            RolloutCreate(id="b", group_id="g1", mode=Mode.VAL),
            RolloutCreate(id="c", group_id="g2"),
        ]
    )
    any_store.transition("c", RolloutState.CANCELLED)
    assert [r.id for r in any_store.list_rollouts(RolloutQuery(group_id="g1"))] == ["a", "b"]
    assert [r.id for r in any_store.list_rollouts(RolloutQuery(mode=Mode.VAL))] == ["b"]
    assert [r.id for r in any_store.list_rollouts(RolloutQuery(state=[RolloutState.CANCELLED]))] == ["c"]
    assert [r.id for r in any_store.list_rollouts(RolloutQuery(ids=["c", "a"]))] == ["a", "c"]
    assert len(any_store.list_rollouts(RolloutQuery(limit=2))) == 2


def test_cursor_never_misses_a_rollout_that_finished_out_of_order(any_store: SqlStore) -> None:
    any_store.create_rollouts([RolloutCreate(id="first"), RolloutCreate(id="second")])
    cursor = max(r.seq for r in any_store.list_rollouts())
    any_store.transition("second", RolloutState.CANCELLED)
    any_store.transition("first", RolloutState.CANCELLED)
    changed = any_store.list_rollouts(RolloutQuery(since_seq=cursor))
    assert [r.id for r in changed] == ["second", "first"]
    assert any_store.list_rollouts(RolloutQuery(since_seq=changed[-1].seq)) == []


def test_running_rollout_cannot_go_back_to_queued(any_store: SqlStore) -> None:
    any_store.create_rollouts([RolloutCreate(id="r")])
    any_store.transition("r", RolloutState.RUNNING)
    with pytest.raises(Conflict, match="running to queued"):
        any_store.transition("r", RolloutState.QUEUED)


def test_terminal_states_are_final(any_store: SqlStore) -> None:
    any_store.create_rollouts([RolloutCreate(id="r")])
    any_store.transition("r", RolloutState.CANCELLED)
    with pytest.raises(Conflict, match="final"):
        any_store.transition("r", RolloutState.RUNNING)


def test_repeating_the_current_state_is_a_no_op(any_store: SqlStore) -> None:
    any_store.create_rollouts([RolloutCreate(id="r")])
    before = any_store.transition("r", RolloutState.CANCELLED)
    assert any_store.transition("r", RolloutState.CANCELLED).seq == before.seq


def test_every_change_moves_the_rollout_to_a_higher_seq(any_store: SqlStore) -> None:
    (r,) = any_store.create_rollouts([RolloutCreate(id="r")])
    ((claimed, _),) = any_store.claim_attempts(1)
    handled = any_store.set_runner_handle("r", 1, "pid:1")
    assert claimed.seq > r.seq
    assert any_store.get_rollout("r").seq > claimed.seq
    assert handled.runner_handle == "pid:1"


def test_new_rollouts_carry_the_current_policy_version(any_store: SqlStore) -> None:
    assert any_store.current_policy_version() == 0
    assert any_store.add_policy_version({"step": 1}).version == 1
    assert any_store.add_policy_version().version == 2
    (r,) = any_store.create_rollouts([RolloutCreate()])
    assert r.policy_version == 2
    assert [(p.version, p.metadata) for p in any_store.list_policy_versions()] == [(1, {"step": 1}), (2, {})]


def test_concurrent_creates_of_the_same_ids_make_each_rollout_once(any_store: SqlStore) -> None:
    items = [RolloutCreate(id=f"r{i}", task=i) for i in range(10)]
    results: list[list[str]] = []

    def worker() -> None:
        results.append([r.id for r in any_store.create_rollouts(items)])

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert results == [[f"r{i}" for i in range(10)]] * 4
    assert len(any_store.list_rollouts(RolloutQuery(limit=100))) == 10
