"""Pause, drain and resume per policy (several policies): one policy's calls wait, the others' run on.

A real gateway on loopback with the fake upstream serving both policies as adapters; the second replica
is another app on the same SQLite file, as `alight serve` on a shared database would be.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from alight.client import AlightClient, ApiError
from alight.semconv import HEADER_AGENT, HEADER_ROLE
from alight_server.app import create_app
from alight_server.stacks.server_thread import ServerThread
from alight_server.store.sql import SqlStore
from tests.server.gateway import test_gateway_policies as two_policies
from tests.server.gateway.test_gateway_policies import Routed

# The two-policy gateway of test_gateway_policies: its fixtures, as they are.
routing, server_config, routed = two_policies.routing, two_policies.server_config, two_policies.routed

TRIAGE = {HEADER_AGENT: "Triage agent"}  # routed to policy "triage"
SPECIALIST = {HEADER_ROLE: "specialist"}  # routed to policy "specialist"


@pytest.fixture
def admin(live_server: Any) -> Iterator[AlightClient]:
    client = AlightClient(live_server.url, admin_key=live_server.admin_key)
    yield client
    client.close()


def _until(check: Callable[[], Any], what: str, timeout_s: float = 10) -> Any:
    deadline = time.monotonic() + timeout_s
    while not (found := check()):
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout_s}s"
        time.sleep(0.02)
    return found


def _in_background(call: Callable[[], httpx.Response]) -> tuple[threading.Thread, dict[str, int]]:
    result: dict[str, int] = {}
    worker = threading.Thread(target=lambda: result.update(status=call().status_code))
    worker.start()
    return worker, result


def _held(routed: Routed, policy: str) -> threading.Event:
    """The fake upstream answers `policy`'s calls only once the returned event is set."""
    event = threading.Event()
    routed.upstream.faults.hold_by_model[policy] = event
    return event


def test_while_one_policy_is_paused_the_other_answers_and_the_paused_one_gets_429(
    routed: Routed, admin: AlightClient
) -> None:
    status = admin.pause_gateway(policy="triage")
    assert status["paused"] is False and status["paused_policies"] == ["triage"]
    assert routed.chat(SPECIALIST).status_code == 200
    refused = routed.chat(TRIAGE)
    assert refused.status_code == 429 and float(refused.headers["retry-after"]) > 0
    assert "policy 'triage' is paused" in refused.json()["error"]["message"]
    assert admin.gateway_status()["in_flight_by_policy"] == {"specialist": 0}  # the refused call left no slot
    assert [c.flags for c in routed.recorded()] == [["policy:specialist"]]  # the refused call was not recorded


def test_after_a_policy_resume_its_calls_carry_the_new_global_version_and_only_its_own_version_moves(
    routed: Routed, admin: AlightClient
) -> None:
    routed.chat(TRIAGE)
    admin.pause_gateway(policy="triage")
    admin.drain_gateway(5, policy="triage")
    resumed = admin.resume_gateway(weights_changed=True, metadata={"step": 1}, policy="triage")
    assert resumed["policy_version"] == 1 and resumed["paused_policies"] == []
    assert resumed["own_versions"] == {"triage": 1, "specialist": 0}
    assert routed.chat(TRIAGE).status_code == 200
    assert routed.chat(SPECIALIST).status_code == 200
    assert admin.policy().versions[-1].metadata == {"step": 1, "policies": ["triage"]}
    calls = admin.trajectory(routed.rollout_id).calls
    seen = [(c.policy, c.call.policy_version, c.policy_own_version) for c in calls]
    assert seen == [("triage", 0, 0), ("triage", 1, 1), ("specialist", 1, 0)]


def test_a_policy_drain_returns_while_another_policys_call_is_still_in_flight(
    routed: Routed, admin: AlightClient, live_server: Any
) -> None:
    release = _held(routed, "specialist")
    worker, result = _in_background(lambda: routed.chat(SPECIALIST))
    try:
        gate = live_server.app.state.gateway.gate
        _until(lambda: gate.busy("specialist") == 1, "the specialist call in flight")
        admin.pause_gateway(policy="triage")
        drained = admin.drain_gateway(10, policy="triage")
        # drained before its 10 s: the specialist's call, held until the end, would have kept a wait for it undrained
        assert drained["drained"] is True and drained["in_flight_at_start"] == 0 and drained["waited_s"] < 10
        assert worker.is_alive() and gate.busy("specialist") == 1
    finally:
        release.set()
        worker.join(timeout=30)
    assert result["status"] == 200


def test_a_policy_drain_waits_for_that_policys_call_in_flight(
    routed: Routed, admin: AlightClient, live_server: Any
) -> None:
    release = _held(routed, "triage")
    worker, result = _in_background(lambda: routed.chat(TRIAGE))
    try:
        _until(lambda: live_server.app.state.gateway.gate.busy("triage") == 1, "the triage call in flight")
        admin.pause_gateway(policy="triage")
        assert admin.drain_gateway(0.3, policy="triage")["drained"] is False
        threading.Timer(0.3, release.set).start()
        drained = admin.drain_gateway(10, policy="triage")
    finally:
        release.set()
        worker.join(timeout=30)
    assert drained["drained"] is True and drained["in_flight_at_start"] == 1 and drained["waited_s"] > 0.1
    assert result["status"] == 200  # a pause never cuts a call


def test_a_streamed_call_of_a_policy_frees_that_policys_slot_when_it_ends(routed: Routed, admin: AlightClient) -> None:
    assert routed.chat(TRIAGE, stream=True).status_code == 200
    assert admin.gateway_status()["in_flight_by_policy"] == {"triage": 0}
    admin.pause_gateway(policy="triage")
    assert admin.drain_gateway(2, policy="triage")["drained"] is True


def test_a_global_pause_still_holds_every_policy(routed: Routed, admin: AlightClient) -> None:
    admin.pause_gateway()
    assert routed.chat(SPECIALIST).status_code == 429
    assert routed.chat(TRIAGE).status_code == 429
    admin.resume_gateway()
    assert routed.chat(SPECIALIST).status_code == 200


@pytest.mark.parametrize(
    "send",
    [
        lambda a: a.pause_gateway(policy="reviewer"),
        lambda a: a.drain_gateway(1, policy="reviewer"),
        lambda a: a.resume_gateway(weights_changed=True, policy="reviewer"),
    ],
    ids=["pause", "drain", "resume"],
)
def test_a_name_that_is_not_a_policy_is_refused_naming_the_policies(
    routed: Routed, admin: AlightClient, send: Callable[[AlightClient], Any]
) -> None:
    with pytest.raises(ApiError) as refused:
        send(admin)
    assert refused.value.status_code == 400
    assert "'reviewer' is not one of this gateway's policies (triage, specialist)" in refused.value.message
    assert admin.gateway_status()["policy_version"] == 0  # the refused resume bumped nothing


@pytest.mark.parametrize("bad", ["", "x" * 201, 7, ["triage"]])
def test_a_policy_that_is_not_a_name_is_a_422(routed: Routed, live_server: Any, bad: object) -> None:
    headers = live_server.admin_headers()
    answer = httpx.post(f"{live_server.url}/api/gateway/pause", json={"policy": bad}, headers=headers)
    assert answer.status_code == 422 and "policy" in answer.json()["error"]["message"]


@pytest.mark.parametrize("routing", [None])
def test_a_policy_on_a_single_policy_gateway_is_refused_saying_routing_is_off(admin: AlightClient) -> None:
    with pytest.raises(ApiError) as refused:
        admin.pause_gateway(policy="triage")
    assert refused.value.status_code == 400 and "routing is off" in refused.value.message
    assert admin.gateway_status()["paused"] is False


@pytest.fixture
def replica_b(live_server: Any, sqlite_url: str) -> Iterator[AlightClient]:
    """A second gateway on the same store file, with the same routing."""
    store = SqlStore(sqlite_url)
    app = create_app(live_server.config, store=store)
    with ServerThread(app) as url:
        client = AlightClient(url, admin_key=live_server.admin_key)
        yield client
        client.close()
    store.close()


def test_a_policy_pause_on_one_replica_holds_that_policy_on_another(
    routed: Routed, admin: AlightClient, replica_b: AlightClient
) -> None:
    assert replica_b.pause_gateway(policy="triage")["paused_policies"] == ["triage"]
    refused = _until(lambda: (r := routed.chat(TRIAGE)).status_code == 429 and r, "a 429 from replica A")
    assert "policy 'triage' is paused" in refused.json()["error"]["message"]
    assert routed.chat(SPECIALIST).status_code == 200
    assert admin.gateway_status()["paused_policies"] == ["triage"]
    replica_b.resume_gateway(weights_changed=True, policy="triage")
    _until(lambda: routed.chat(TRIAGE).status_code == 200, "replica A answering triage again")
    assert routed.recorded()[-1].policy_version == 1
    assert admin.gateway_status()["own_versions"] == {"triage": 1, "specialist": 0}


def test_a_policy_drain_on_one_replica_waits_only_for_that_policys_calls_on_another(
    routed: Routed, replica_b: AlightClient, live_server: Any
) -> None:
    gate = live_server.app.state.gateway.gate
    holds = {policy: _held(routed, policy) for policy in ("triage", "specialist")}
    workers = [_in_background(lambda h=h: routed.chat(h)) for h in (TRIAGE, SPECIALIST)]
    try:
        _until(lambda: gate.busy("triage") == 1 and gate.busy("specialist") == 1, "both calls in flight on A")
        replica_b.pause_gateway(policy="specialist")
        # B sees A's specialist call (reported with the pause applied) and waits for it, not for triage's
        assert replica_b.drain_gateway(0.5, policy="specialist")["drained"] is False
        holds["specialist"].set()
        drained = replica_b.drain_gateway(10, policy="specialist")
        assert drained["drained"] is True and drained["replicas"] == 2
        assert gate.busy("triage") == 1  # still held upstream: the drain did not wait for it
    finally:
        for event in holds.values():
            event.set()
        for worker, _ in workers:
            worker.join(timeout=30)
    assert [result["status"] for _, result in workers] == [200, 200]
