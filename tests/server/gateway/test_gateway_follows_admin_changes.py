"""Admin changes reach the gateway at once (finished or cancelled rollouts, added or removed upstreams), and
changes made elsewhere within the store sync's interval."""

from __future__ import annotations

import time

import httpx

from alight.schemas import AttemptFinish
from alight_server.gateway.callers import LIVE_STATE_TTL_S

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}


def _chat(url: str, token: str) -> httpx.Response:
    return httpx.post(f"{url}/chat/completions", headers={"authorization": f"Bearer {token}"}, json=CHAT, timeout=30)


def test_finishing_an_attempt_over_the_api_refuses_its_next_call_at_once(gateway, attempt, admin_client):
    assert _chat(attempt.base_url, attempt.token).status_code == 200  # admission is now cached
    finish = AttemptFinish(status="succeeded").model_dump(mode="json")
    admin_client.post(f"/api/rollouts/{attempt.rollout_id}/attempts/1/finish", json=finish).raise_for_status()
    resp = _chat(attempt.base_url, attempt.token)
    assert resp.status_code == 409, resp.text
    assert "succeeded" in resp.json()["error"]["message"]
    assert len(gateway.server.store.list_model_calls(attempt.rollout_id)) == 1


def test_cancelling_over_the_api_refuses_the_next_call_at_once(gateway, attempt, admin_client):
    assert _chat(attempt.base_url, attempt.token).status_code == 200
    admin_client.post(f"/api/rollouts/{attempt.rollout_id}/cancel").raise_for_status()
    resp = _chat(attempt.base_url, attempt.token)
    assert resp.status_code == 409, resp.text
    assert "cancelled" in resp.json()["error"]["message"]


def test_upstream_removal_and_registration_apply_to_the_next_call(gateway, attempt, admin_client):
    assert _chat(attempt.base_url, attempt.token).status_code == 200  # the upstream list is now cached
    admin_client.delete("/api/upstreams/u1").raise_for_status()
    resp = _chat(attempt.base_url, attempt.token)
    assert resp.status_code == 503, resp.text
    assert "no upstream is registered" in resp.json()["error"]["message"]
    admin_client.post("/api/upstreams", json=gateway.registration("u2")).raise_for_status()
    resp = _chat(attempt.base_url, attempt.token)
    assert resp.status_code == 200, resp.text
    assert [c.upstream for c in gateway.server.store.list_model_calls(attempt.rollout_id)] == ["u1", None, "u2"]


def test_an_attempt_finished_by_another_process_is_refused_once_the_store_sync_reads_it(gateway, attempt):
    assert _chat(attempt.base_url, attempt.token).status_code == 200
    # Straight in the store, as another gateway replica or a controller would: no hook tells this server.
    gateway.server.store.finish_attempt(attempt.rollout_id, 1, AttemptFinish(status="failed"))
    deadline = time.monotonic() + 5
    while (resp := _chat(attempt.base_url, attempt.token)).status_code == 200 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert resp.status_code == 409, resp.text


def test_a_running_attempt_is_not_read_from_the_store_again_while_the_sync_follows(gateway, attempt, monkeypatch):
    store = gateway.server.store
    assert _chat(attempt.base_url, attempt.token).status_code == 200
    # Wait until the sync has read the attempt's claim (a change it forgets the rollout for): read after the
    # next call, it would make the call after that read the store again.
    sync, claimed = gateway.server.app.state.gateway.sync, store.get_rollout(attempt.rollout_id).seq
    deadline = time.monotonic() + 10
    while sync._seq is None or sync._seq < claimed:
        assert time.monotonic() < deadline, f"the store sync did not read past seq {claimed} in 10 s"
        time.sleep(0.01)
    assert _chat(attempt.base_url, attempt.token).status_code == 200  # its state is now cached
    reads: list[str] = []
    real = store.get_rollout
    monkeypatch.setattr(store, "get_rollout", lambda rollout_id: reads.append(rollout_id) or real(rollout_id))
    for _ in range(2):
        time.sleep(LIVE_STATE_TTL_S + 0.1)  # an agent that thinks between calls
        assert _chat(attempt.base_url, attempt.token).status_code == 200
    assert reads == []
