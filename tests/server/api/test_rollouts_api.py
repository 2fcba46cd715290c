"""Rollout routes over real HTTP: create, list with cursor, get, status, cancel, events, rewards, wait."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

import httpx

if TYPE_CHECKING:
    from tests.conftest import LiveServer
    from tests.server.api.conftest import Create


def test_batch_create_returns_the_rollouts_in_order(admin_client: httpx.Client, create: Create) -> None:
    out = create({"id": "b", "group_id": "g", "mode": "val"}, {"id": "a", "task": [1]})
    assert [r["id"] for r in out] == ["b", "a"]
    assert out[0]["mode"] == "val" and out[0]["state"] == "queued" and out[1]["task"] == [1]


def test_retried_create_is_idempotent_and_a_changed_body_is_409(admin_client: httpx.Client, create: Create) -> None:
    (first,) = create({"id": "r", "task": "t"})
    (again,) = create({"id": "r", "task": "t"})
    assert again == first
    response = admin_client.post("/api/rollouts", json={"rollouts": [{"id": "r", "task": "other"}]})
    assert response.status_code == 409 and "different body" in response.json()["error"]["message"]


def test_list_filters_and_pages_with_the_seq_cursor(admin_client: httpx.Client, create: Create) -> None:
    create(*({"id": f"r{i}", "group_id": "g1" if i % 2 else "g2"} for i in range(5)))
    page = admin_client.get("/api/rollouts", params={"limit": 2}).json()
    assert [r["id"] for r in page["rollouts"]] == ["r0", "r1"]
    rest = admin_client.get("/api/rollouts", params={"since_seq": page["next_seq"]}).json()
    assert [r["id"] for r in rest["rollouts"]] == ["r2", "r3", "r4"]
    g1 = admin_client.get("/api/rollouts", params={"group_id": "g1"}).json()["rollouts"]
    assert [r["id"] for r in g1] == ["r1", "r3"]
    admin_client.post("/api/rollouts/r0/cancel")
    states = admin_client.get("/api/rollouts", params=[("state", "cancelled"), ("state", "running")]).json()
    assert [r["id"] for r in states["rollouts"]] == ["r0"]
    after = admin_client.get("/api/rollouts", params={"since_seq": rest["next_seq"]}).json()
    assert [r["id"] for r in after["rollouts"]] == ["r0"]  # the cancel moved it past the cursor
    assert admin_client.get("/api/rollouts", params={"mode": "val"}).json()["rollouts"] == []


def test_get_includes_attempts(admin_client: httpx.Client, running: dict[str, Any]) -> None:
    rollout = admin_client.get("/api/rollouts/r1").json()
    assert rollout["state"] == "running"
    assert [(a["attempt"], a["status"]) for a in rollout["attempts"]] == [(1, "running")]


def test_status_moves_through_the_state_machine_and_refuses_illegal_moves(
    admin_client: httpx.Client, create: Create
) -> None:
    create({"id": "r"})
    assert admin_client.post("/api/rollouts/r/status", json={"state": "running"}).json()["state"] == "running"
    response = admin_client.post("/api/rollouts/r/status", json={"state": "queued"})
    assert response.status_code == 409
    assert response.json()["error"] == {
        "message": "rollout 'r' cannot move from running to queued; allowed: cancelled, failed, succeeded",
        "type": "conflict_error",
        "param": None,
        "code": 409,
    }


def test_cancel_is_final_and_repeatable(admin_client: httpx.Client, running: dict[str, Any]) -> None:
    cancelled = admin_client.post("/api/rollouts/r1/cancel").json()
    assert cancelled["state"] == "cancelled" and cancelled["attempts"][0]["status"] == "failed"
    assert admin_client.post("/api/rollouts/r1/cancel").status_code == 200
    assert admin_client.post("/api/rollouts/r1/status", json={"state": "running"}).status_code == 409


def test_events_append_idempotently_and_query_by_kind(admin_client: httpx.Client, create: Create) -> None:
    create({"id": "r"})
    body = {"id": "e1", "kind": "log", "attempt": 1, "payload": {"line": "hello"}}
    first = admin_client.post("/api/rollouts/r/events", json=body).json()
    assert admin_client.post("/api/rollouts/r/events", json=body).json() == first
    admin_client.post("/api/rollouts/r/events", json={"kind": "progress"})
    events = admin_client.get("/api/rollouts/r/events", params={"kind": "log"}).json()["events"]
    assert [(e["id"], e["payload"]) for e in events] == [("e1", {"line": "hello"})]
    assert len(admin_client.get("/api/rollouts/r/events").json()["events"]) == 2


def test_rewards_append_and_query_by_attempt(admin_client: httpx.Client, create: Create) -> None:
    create({"id": "r"})
    admin_client.post("/api/rollouts/r/rewards", json={"attempt": 1, "value": 1.0, "final": True})
    admin_client.post("/api/rollouts/r/rewards", json={"attempt": 2, "value": 0.5, "name": "fmt"})
    rewards = admin_client.get("/api/rollouts/r/rewards", params={"attempt": 2}).json()["rewards"]
    assert [(w["value"], w["name"], w["source"]) for w in rewards] == [(0.5, "fmt", "evaluator")]


def test_non_finite_rewards_are_refused_with_a_message(admin_client: httpx.Client, create: Create) -> None:
    create({"id": "r"})
    for raw in (b'{"attempt": 1, "value": NaN}', b'{"attempt": 1, "value": 1e999}'):
        response = admin_client.post(
            "/api/rollouts/r/rewards", content=raw, headers={"Content-Type": "application/json"}
        )
        assert response.status_code == 422
        assert "finite" in response.json()["error"]["message"]


def test_wait_returns_at_once_when_everything_is_final(admin_client: httpx.Client, create: Create) -> None:
    create({"id": "a"}, {"id": "b"})
    admin_client.post("/api/rollouts/a/cancel")
    admin_client.post("/api/rollouts/b/cancel")
    result = admin_client.post("/api/rollouts/wait", json={"ids": ["a", "b"], "timeout_s": 30}).json()
    assert sorted(r["id"] for r in result["done"]) == ["a", "b"] and result["pending"] == []


def test_wait_times_out_with_the_pending_ids(admin_client: httpx.Client, create: Create) -> None:
    create({"id": "a"}, {"id": "b"})
    admin_client.post("/api/rollouts/a/cancel")
    result = admin_client.post("/api/rollouts/wait", json={"ids": ["a", "b"], "timeout_s": 0.2}).json()
    assert [r["id"] for r in result["done"]] == ["a"] and result["pending"] == ["b"]


def test_wait_wakes_up_when_the_last_rollout_finishes(admin_client: httpx.Client, create: Create) -> None:
    create({"id": "a"})
    timer = threading.Timer(0.3, lambda: admin_client.post("/api/rollouts/a/cancel"))
    timer.start()
    started = time.monotonic()
    result = admin_client.post("/api/rollouts/wait", json={"ids": ["a"], "timeout_s": 20}).json()
    timer.join()
    assert [r["id"] for r in result["done"]] == ["a"] and time.monotonic() - started < 15


def test_wait_on_an_unknown_id_is_404(admin_client: httpx.Client) -> None:
    response = admin_client.post("/api/rollouts/wait", json={"ids": ["ghost"], "timeout_s": 0})
    assert response.status_code == 404 and "ghost" in response.json()["error"]["message"]


def test_health_and_readiness(live_server: LiveServer) -> None:
    assert httpx.get(f"{live_server.url}/healthz").json() == {"status": "ok"}
    assert httpx.get(f"{live_server.url}/readyz").json() == {"status": "ok"}


def test_list_takes_every_rollout_query_filter(admin_client: httpx.Client, create: Create) -> None:
    create({"id": "run1-a"}, {"id": "run1-b", "mode": "val"}, {"id": "run2-a"})
    by_ids = admin_client.get("/api/rollouts", params=[("ids", "run2-a"), ("ids", "run1-a")]).json()["rollouts"]
    assert [r["id"] for r in by_ids] == ["run1-a", "run2-a"]
    prefixed = admin_client.get("/api/rollouts", params={"id_prefix": "run1-", "mode": "train"}).json()["rollouts"]
    assert [r["id"] for r in prefixed] == ["run1-a"]


def test_an_unknown_list_parameter_is_a_422_naming_it(admin_client: httpx.Client) -> None:
    response = admin_client.get("/api/rollouts", params={"states": "queued"})
    assert response.status_code == 422 and "states" in response.text


def test_a_list_limit_above_the_batch_cap_is_a_422(admin_client: httpx.Client) -> None:
    assert admin_client.get("/api/rollouts", params={"limit": 1001}).status_code == 422


def test_the_openapi_document_lists_the_routes(admin_client: httpx.Client) -> None:
    paths = admin_client.get("/openapi.json").json()["paths"]
    for path in ("/api/rollouts", "/api/rollouts/wait", "/api/attempts/claim", "/api/upstreams", "/api/policy"):
        assert path in paths
