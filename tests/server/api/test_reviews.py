"""The review queue's API on a real server: what waits, one final decision per rollout, and the errors that say
what to do (the one error envelope). Who may call it is tests/server/redaction/test_reviewer_keys.py."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx
import pytest

from alight.schemas import MAX_EVIDENCE_CHARS, REVIEW_DECISION, REVIEW_REQUESTED, EventCreate, RolloutCreate
from tests.server.redaction.planted_review import COMMANDS, DIFF, plant_flagged

if TYPE_CHECKING:
    from tests.conftest import LiveServer
    from tests.server.api.conftest import Claim


@pytest.fixture
def queued(live_server: LiveServer) -> LiveServer:
    """flagged-1 and flagged-2 wait; gated-1 broke a hard gate as well (0, never queued); clean-1 has no flag."""
    store = live_server.store
    plant_flagged(store, "flagged-1", "calc.py:3 calls sys._getframe")
    plant_flagged(store, "flagged-2", "calc.py:9 reads f_back")
    plant_flagged(store, "gated-1", "calc.py:3 imports gc", hard_gate=True)
    store.create_rollouts([RolloutCreate(id="clean-1")])
    return live_server


def _error(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    return error["message"]


def _queue(admin_client: httpx.Client) -> list[str]:
    return [r["rollout_id"] for r in admin_client.get("/api/reviews").json()["reviews"]]


def test_the_queue_lists_flagged_rollouts_with_their_evidence_diff_and_commands(
    queued: LiveServer, admin_client: httpx.Client
) -> None:
    body = admin_client.get("/api/reviews").json()
    assert [r["rollout_id"] for r in body["reviews"]] == ["flagged-1", "flagged-2"] and body["total"] == 2
    first = body["reviews"][0]
    assert first["flags"] == [
        {"kind": "review_flag", "attempt": 1, "rule": "runner_reach", "evidence": "calc.py:3 calls sys._getframe"}
    ]
    assert first["episode"]["diff"] == DIFF and first["episode"]["command_lines"] == COMMANDS
    assert (first["reasons"], first["final_reward"], first["state"]) == (["flag"], 1.0, "succeeded")


def test_an_audit_request_queues_a_rollout_that_passed_every_gate(
    queued: LiveServer, admin_client: httpx.Client
) -> None:
    audit = EventCreate(kind=REVIEW_REQUESTED, payload={"reason": "audit"})
    assert admin_client.post("/api/rollouts/clean-1/events", json=audit.model_dump(mode="json")).status_code == 200
    body = admin_client.get("/api/reviews").json()
    assert [(r["rollout_id"], r["reasons"]) for r in body["reviews"]][-1] == ("clean-1", ["audit"])


def test_a_decision_is_stored_once_and_takes_the_rollout_off_the_queue(
    queued: LiveServer, admin_client: httpx.Client
) -> None:
    response = admin_client.post("/api/rollouts/flagged-1/review", json={"decision": "accept", "note": "a fix"})
    assert response.status_code == 200, response.text
    assert response.json() | {"decided_at": None} == {
        "rollout_id": "flagged-1",
        "review": "accepted",
        "decided_at": None,
        "decision": "accept",
        "reviewer": "admin",
        "note": "a fix",
    }
    assert _queue(admin_client) == ["flagged-2"]
    trajectory = admin_client.get("/api/rollouts/flagged-1/trajectory").json()
    assert trajectory["review"] == "accepted"  # the trainer reads the same rule off the trajectory


@pytest.mark.parametrize("second", ["accept", "reject"])
def test_a_second_decision_is_a_409_naming_the_first(
    queued: LiveServer, admin_client: httpx.Client, second: str
) -> None:
    admin_client.post("/api/rollouts/flagged-1/review", json={"decision": "accept"}).raise_for_status()
    message = _error(admin_client.post("/api/rollouts/flagged-1/review", json={"decision": second}), 409)
    assert "already decided (accept, by admin" in message and "final" in message
    assert len(queued.store.list_events("flagged-1", kind=REVIEW_DECISION)) == 1


@pytest.mark.parametrize(
    ("rollout", "status", "says"),
    [
        ("no-such-rollout", 404, "no-such-rollout"),
        ("clean-1", 409, "is not in the review queue: it has no review_flag and no review_requested event"),
        ("gated-1", 409, "broke a hard gate (test_file_modified): its reward is 0 and it never trains"),
    ],
)
def test_a_rollout_that_is_not_pending_is_refused_saying_why_and_what_to_do(
    queued: LiveServer, admin_client: httpx.Client, rollout: str, status: int, says: str
) -> None:
    message = _error(admin_client.post(f"/api/rollouts/{rollout}/review", json={"decision": "accept"}), status)
    assert says in message
    if status == 409:
        assert "GET /api/reviews" in message


def test_a_rollout_still_running_waits_for_its_end(
    queued: LiveServer, admin_client: httpx.Client, claim: Claim
) -> None:
    queued.store.create_rollouts([RolloutCreate(id="busy")])
    token = claim("busy")["token"]
    flag = {"kind": "review_flag", "payload": {"rule": "runner_reach", "evidence": "x"}}
    agent = {"Authorization": f"Bearer {token}"}
    assert httpx.post(f"{queued.url}/api/rollouts/busy/events", json=flag, headers=agent).status_code == 200
    message = _error(admin_client.post("/api/rollouts/busy/review", json={"decision": "reject"}), 409)
    assert "is still running; decide it once it has ended" in message


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"decision": "maybe"}, "decision"),
        ({"decision": "accept", "note": "x" * (MAX_EVIDENCE_CHARS + 1)}, "note"),
        ({"decision": "accept", "reviewer": "someone-else"}, "reviewer"),  # the key names the reviewer, not the body
    ],
)
def test_a_malformed_decision_is_a_422_naming_the_field(
    queued: LiveServer, admin_client: httpx.Client, body: dict[str, Any], says: str
) -> None:
    assert says in _error(admin_client.post("/api/rollouts/flagged-1/review", json=body), 422)
    assert queued.store.list_events("flagged-1", kind=REVIEW_DECISION) == []


def test_the_events_route_carries_no_decision_and_no_audit_request_from_an_attempt(
    queued: LiveServer, admin_client: httpx.Client, claim: Claim
) -> None:
    decision = {"kind": REVIEW_DECISION, "payload": {"decision": "accept", "reviewer": "me", "note": ""}}
    assert "POST /api/rollouts/{id}/review only" in _error(
        admin_client.post("/api/rollouts/flagged-2/events", json=decision), 403
    )
    queued.store.create_rollouts([RolloutCreate(id="self-audit")])
    agent = {"Authorization": f"Bearer {claim('self-audit')['token']}"}
    for kind, payload in ((REVIEW_REQUESTED, {"reason": "audit"}), (REVIEW_DECISION, decision["payload"])):
        response = httpx.post(
            f"{queued.url}/api/rollouts/self-audit/events", json={"kind": kind, "payload": payload}, headers=agent
        )
        assert response.status_code == 403, (kind, response.text)
    assert _queue(admin_client) == ["flagged-1", "flagged-2"]
    review = httpx.post(f"{queued.url}/api/rollouts/self-audit/review", json={"decision": "accept"}, headers=agent)
    assert review.status_code == 403 and "reviewer key" in review.json()["error"]["message"]
