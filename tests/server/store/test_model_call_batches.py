"""Store contract: `add_model_calls`, the gateway's group commit of several model calls in one transaction."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import pytest

from alight.schemas import ApiFlavour, ModelCall, RolloutCreate
from alight_server.store import NotFound
from alight_server.store.sql import SqlStore


@pytest.fixture
def rollout_ids(any_store: SqlStore) -> list[str]:
    return [r.id for r in any_store.create_rollouts([RolloutCreate(id="r"), RolloutCreate(id="s")])]


def _call(call_id: str, rollout_id: str = "r", attempt: int = 1) -> ModelCall:
    return ModelCall(
        id=call_id,
        rollout_id=rollout_id,
        attempt=attempt,
        seq=-1,
        flavour=ApiFlavour.CHAT,
        request={"messages": [{"role": "user", "content": call_id}]},
        response={"choices": []},
        prompt_token_ids=[1, 2, 3],
        response_token_ids=[4, 5],
        response_logprobs=[-0.5, -0.25],
        status_code=200,
        created_at=datetime.now(UTC),
    )


def test_a_batch_gets_per_attempt_seqs_in_order(any_store: SqlStore, rollout_ids: list[str]) -> None:
    any_store.add_model_call(_call("before"))
    batch = [_call("a"), _call("b", "s"), _call("c"), _call("d", attempt=2), _call("e", "s")]
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
    first = any_store.add_model_calls([_call("a"), _call("a"), _call("b")])
    assert [c.seq for c in first] == [0, 0, 1]
    again = any_store.add_model_calls([_call("b"), _call("c")])
    assert [(c.id, c.seq) for c in again] == [("b", 1), ("c", 2)]
    assert len(any_store.list_model_calls("r")) == 3


def test_an_unknown_rollout_stores_nothing_of_the_batch(any_store: SqlStore, rollout_ids: list[str]) -> None:
    with pytest.raises(NotFound, match="nope"):
        any_store.add_model_calls([_call("a"), _call("x", "nope"), _call("b")])
    assert any_store.list_model_calls("r") == []
    assert [c.seq for c in any_store.add_model_calls([_call("a")])] == [0]


def test_concurrent_batches_and_single_calls_never_share_a_seq(any_store: SqlStore, rollout_ids: list[str]) -> None:
    seqs: list[int] = []

    def batches(k: int) -> None:
        for i in range(4):
            seqs.extend(c.seq for c in any_store.add_model_calls([_call(f"b{k}-{i}-{j}") for j in range(3)]))

    def singles() -> None:
        seqs.extend(any_store.add_model_call(_call(f"s{i}")).seq for i in range(6))

    threads = [threading.Thread(target=batches, args=(k,)) for k in range(3)] + [threading.Thread(target=singles)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert sorted(seqs) == list(range(3 * 4 * 3 + 6))
