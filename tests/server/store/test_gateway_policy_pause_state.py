"""Store contract (SQLite, PostgreSQL): policies paused on their own, and each replica's calls in flight per policy."""

from __future__ import annotations

from alight.schemas import GatewayPause, GatewayReplica
from alight_server.store.sql import SqlStore


def _replica(replica_id: str, **changes: object) -> GatewayReplica:
    values = {"address": "host:1", "paused": False, "pause_epoch": 0, "in_flight": 0, "reported_at": 100.5}
    return GatewayReplica.model_validate({"id": replica_id, **values, **changes})


def test_a_policy_pause_is_listed_and_moves_the_epoch_only_when_it_changes(any_store: SqlStore) -> None:
    assert any_store.set_gateway_paused(True, "triage") == GatewayPause(paused=False, epoch=1, policies=["triage"])
    assert any_store.set_gateway_paused(True, "triage").epoch == 1
    assert any_store.set_gateway_paused(True, "coder").policies == ["coder", "triage"]
    assert any_store.set_gateway_paused(False, "triage") == GatewayPause(paused=False, epoch=3, policies=["coder"])
    assert any_store.set_gateway_paused(False, "triage").epoch == 3
    assert any_store.gateway_sync(None).pause == GatewayPause(paused=False, epoch=3, policies=["coder"])


def test_a_global_pause_and_a_policy_pause_are_independent(any_store: SqlStore) -> None:
    any_store.set_gateway_paused(True, "triage")
    any_store.set_gateway_paused(True)
    assert any_store.set_gateway_paused(False) == GatewayPause(paused=False, epoch=3, policies=["triage"])


def test_a_replicas_calls_in_flight_per_policy_are_replaced_with_its_report_and_removed_with_it(
    any_store: SqlStore,
) -> None:
    any_store.report_gateway_replica(_replica("a", in_flight=3, in_flight_by_policy={"triage": 2, "coder": 1}))
    any_store.report_gateway_replica(_replica("b", in_flight=1, in_flight_by_policy={"coder": 1}))
    any_store.report_gateway_replica(_replica("a", in_flight=1, in_flight_by_policy={"coder": 1}))
    assert {r.id: r.in_flight_by_policy for r in any_store.list_gateway_replicas()} == {
        "a": {"coder": 1},
        "b": {"coder": 1},
    }
    any_store.remove_gateway_replica("a")
    any_store.report_gateway_replica(_replica("a"))  # a replica of the same id, reporting afresh
    assert {r.id: r.in_flight_by_policy for r in any_store.list_gateway_replicas()} == {"a": {}, "b": {"coder": 1}}
