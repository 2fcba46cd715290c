"""Store contract: the gateway's shared pause and the reports of the gateway processes that follow it."""

from __future__ import annotations

import threading

from alight.schemas import AttemptFinish, GatewayPause, GatewayReplica, RolloutCreate
from alight_server.store.sql import SqlStore


def _replica(replica_id: str, **changes: object) -> GatewayReplica:
    values = {"address": "host:1", "paused": False, "pause_epoch": 0, "in_flight": 0, "reported_at": 100.5}
    return GatewayReplica.model_validate({"id": replica_id, **values, **changes})


def test_the_pause_epoch_moves_only_when_the_pause_changes(any_store: SqlStore) -> None:
    assert any_store.gateway_pause() == GatewayPause(paused=False, epoch=0)
    assert any_store.set_gateway_paused(False) == GatewayPause(paused=False, epoch=0)
    assert any_store.set_gateway_paused(True) == GatewayPause(paused=True, epoch=1)
    assert any_store.set_gateway_paused(True) == GatewayPause(paused=True, epoch=1)
    assert any_store.set_gateway_paused(False) == GatewayPause(paused=False, epoch=2)
    assert any_store.gateway_pause() == GatewayPause(paused=False, epoch=2)


def test_the_pause_survives_reopening_the_store(any_store: SqlStore, store_url: str) -> None:
    any_store.set_gateway_paused(True)
    reopened = SqlStore(store_url)
    assert reopened.gateway_pause() == GatewayPause(paused=True, epoch=1)
    reopened.close()


def test_concurrent_pauses_and_resumes_leave_a_consistent_epoch(any_store: SqlStore) -> None:
    """Every change bumps the epoch exactly once, whoever makes it: the epoch counts the changes."""

    def flip(k: int) -> None:
        for i in range(10):
            any_store.set_gateway_paused((i + k) % 2 == 0)

    threads = [threading.Thread(target=flip, args=(k,)) for k in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    final = any_store.gateway_pause()
    assert final.epoch % 2 == int(final.paused)  # it starts open at 0 and every change flips it


def test_replica_reports_are_replaced_listed_and_removed(any_store: SqlStore) -> None:
    any_store.report_gateway_replica(_replica("b", in_flight=3))
    any_store.report_gateway_replica(_replica("a"))
    any_store.report_gateway_replica(_replica("b", paused=True, pause_epoch=4, in_flight=0, reported_at=101.25))
    assert any_store.list_gateway_replicas() == [
        _replica("a"),
        _replica("b", paused=True, pause_epoch=4, in_flight=0, reported_at=101.25),
    ]
    any_store.remove_gateway_replica("b")
    any_store.remove_gateway_replica("b")  # already gone: nothing to do
    assert [r.id for r in any_store.list_gateway_replicas()] == ["a"]


def test_the_gateway_sync_lists_the_rollouts_changed_after_a_seq(any_store: SqlStore) -> None:
    first = any_store.gateway_sync(None)
    assert first.changed is None and first.pause == GatewayPause(paused=False, epoch=0)
    a, b = any_store.create_rollouts([RolloutCreate(), RolloutCreate()])
    any_store.claim_attempts(limit=1, ids=[a.id])
    created = any_store.gateway_sync(first.rollout_seq)
    assert created.changed == [b.id, a.id]  # oldest change first: a's claim is newer than b's creation
    any_store.finish_attempt(a.id, 1, AttemptFinish(status="succeeded"))
    any_store.add_policy_version()
    finished = any_store.gateway_sync(created.rollout_seq)
    assert finished.changed == [a.id] and finished.policy_version == 1
    assert any_store.gateway_sync(finished.rollout_seq).changed == []
