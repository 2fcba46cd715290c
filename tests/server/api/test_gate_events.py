"""Gate violations (`reward_hacking` events) are stored in one shape: {rule, evidence}; anything else is a 422."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from alight.schemas import MAX_EVIDENCE_CHARS, REWARD_HACKING


def _post(client: httpx.Client, payload: dict[str, Any], token: str) -> httpx.Response:
    body = {"id": "gate-1", "kind": REWARD_HACKING, "payload": payload}
    return client.post("/api/rollouts/r1/events", json=body, headers={"Authorization": f"Bearer {token}"})


def test_an_agents_gate_violation_is_stored_and_read_back_in_the_documented_shape(
    admin_client: httpx.Client, running: dict[str, Any]
) -> None:
    payload = {"rule": "test_file_modified", "evidence": "tests/test_x.py was modified"}
    assert _post(admin_client, payload, running["token"]).status_code == 200
    (event,) = admin_client.get("/api/rollouts/r1/events", params={"kind": REWARD_HACKING}).json()["events"]
    assert {k: event[k] for k in ("id", "rollout_id", "attempt", "kind", "payload")} == {
        "id": "gate-1", "rollout_id": "r1", "attempt": 1, "kind": REWARD_HACKING, "payload": payload,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("payload", "named"),
    [
        ({"rule": "canary_read"}, "evidence"),
        ({"rule": "Canary Read", "evidence": "x"}, "rule"),
        ({"rule": "canary_read", "evidence": "x", "score": 1}, "score"),
        ({"rule": "canary_read", "evidence": "x" * (MAX_EVIDENCE_CHARS + 1)}, "evidence"),
    ],
)
def test_a_gate_violation_in_another_shape_is_a_422_naming_the_field_and_nothing_is_stored(
    admin_client: httpx.Client, running: dict[str, Any], payload: dict[str, Any], named: str
) -> None:
    response = _post(admin_client, payload, running["token"])
    assert response.status_code == 422, response.text
    message = response.json()["error"]["message"]
    assert "payload must be {rule" in message and named in message
    assert admin_client.get("/api/rollouts/r1/events", params={"kind": REWARD_HACKING}).json()["events"] == []
