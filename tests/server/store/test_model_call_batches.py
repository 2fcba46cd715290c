"""Store contract: `add_model_calls`, the gateway's group commit of several model calls in one transaction."""

from __future__ import annotations

import threading

import pytest
from store_testkit import model_call

from alight.schemas import RolloutCreate
from alight_server.store import NotFound
from alight_server.store.sql import SqlStore


@pytest.fixture
def rollout_ids(any_store: SqlStore) -> list[str]:
    return [r.id for r in any_store.create_rollouts([RolloutCreate(id="r"), RolloutCreate(id="s")])]


def test_a_batch_gets_per_attempt_seqs_in_order(any_store: SqlStore, rollout_ids: list[str]) -> None:
    any_store.add_model_call(model_call("before"))
    batch = [model_call("a"), model_call("b", "s"), model_call("c"), model_call("d", attempt=2), model_call("e", "s")]
    stored = any_store.add_model_calls(batch)
    assert [(c.id, c.rollout_id, c.attempt, c.seq) for c in stored] == [
        ("a", "r", 1, 1),
        ("b", "s", 1, 0),
        ("c", "r", 1, 2),
        ("d", "r", 2, 0),
        ("e", "s", 1, 1),
    ]
    assert [c.id for c in any_store.list_model_calls("r", attempt=1)] == ["before", "a", "c"]
    assert any_store.list_model_calls("s")[1].request == {"messages": [{"role": "user", "content": "e"}]}
    assert any_store.add_model_calls([]) == []


def test_a_repeated_id_in_or_across_batches_returns_the_stored_call(
    any_store: SqlStore, rollout_ids: list[str]
) -> None:
    first = any_store.add_model_calls([model_call("a"), model_call("a"), model_call("b")])
    assert [c.seq for c in first] == [0, 0, 1]
    again = any_store.add_model_calls([model_call("b"), model_call("c")])
    assert [(c.id, c.seq) for c in again] == [("b", 1), ("c", 2)]
    assert len(any_store.list_model_calls("r")) == 3


def test_an_unknown_rollout_stores_nothing_of_the_batch(any_store: SqlStore, rollout_ids: list[str]) -> None:
    with pytest.raises(NotFound, match="nope"):
        any_store.add_model_calls([model_call("a"), model_call("x", "nope"), model_call("b")])
    assert any_store.list_model_calls("r") == []
    assert [c.seq for c in any_store.add_model_calls([model_call("a")])] == [0]


def test_concurrent_batches_and_single_calls_never_share_a_seq(any_store: SqlStore, rollout_ids: list[str]) -> None:
    seqs: list[int] = []

    def batches(k: int) -> None:
        for i in range(4):
            seqs.extend(c.seq for c in any_store.add_model_calls([model_call(f"b{k}-{i}-{j}") for j in range(3)]))

    def singles() -> None:
        seqs.extend(any_store.add_model_call(model_call(f"s{i}")).seq for i in range(6))

    threads = [threading.Thread(target=batches, args=(k,)) for k in range(3)] + [threading.Thread(target=singles)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert sorted(seqs) == list(range(3 * 4 * 3 + 6))


def test_concurrent_batches_over_several_rollouts_neither_deadlock_nor_share_a_seq(
    any_store: SqlStore, rollout_ids: list[str]
) -> None:
    """Batches name the rollouts in opposite orders; the store locks them in one order, so all commit."""
    errors: list[BaseException] = []

    def batches(k: int) -> None:
        order = ["r", "s"] if k % 2 else ["s", "r"]
        try:
            for i in range(5):
                any_store.add_model_calls([model_call(f"{k}-{i}-{rid}", rid) for rid in order])
        except BaseException as exc:  # surfaced below: a thread's failure must fail the test
            errors.append(exc)

    threads = [threading.Thread(target=batches, args=(k,)) for k in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    for rid in rollout_ids:
        assert [c.seq for c in any_store.list_model_calls(rid)] == list(range(4 * 5))
