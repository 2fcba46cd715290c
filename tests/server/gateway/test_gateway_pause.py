"""Pause, drain and resume around a weight update: no call breaks, new calls wait and then succeed."""

from __future__ import annotations

import asyncio
import threading
import time

import httpx
import openai
import pytest

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}


async def _until_in_flight(gateway, timeout_s: float = 20) -> None:
    """Wait until the gateway has admitted a call (a fixed sleep is flaky on a busy machine)."""
    gate = gateway.server.app.state.gateway.gate
    deadline = time.monotonic() + timeout_s
    while gate.in_flight == 0:
        assert time.monotonic() < deadline, "the call never reached the gateway"
        await asyncio.sleep(0.01)


def _admin(gateway) -> httpx.Client:
    return httpx.Client(base_url=gateway.url, headers=gateway.server.admin_headers(), timeout=30)


def test_paused_gateway_answers_429_with_retry_after(gateway, attempt, fake):
    with _admin(gateway) as admin:
        assert admin.post("/api/gateway/pause").json()["paused"] is True
        resp = httpx.post(
            f"{attempt.base_url}/chat/completions", headers={"authorization": f"Bearer {attempt.token}"}, json=CHAT
        )
    assert resp.status_code == 429
    assert float(resp.headers["retry-after"]) > 0 and resp.headers["retry-after-ms"]
    assert "paused" in resp.json()["error"]["message"]
    assert fake.calls == []


def test_call_issued_during_pause_succeeds_after_resume(gateway, attempt, fake):
    gateway.server.app.state.gateway.config.retry_after_s = 0.2
    client = openai.OpenAI(base_url=attempt.base_url, api_key=attempt.token, max_retries=50)
    with _admin(gateway) as admin:
        admin.post("/api/gateway/pause").raise_for_status()
        result: dict = {}
        worker = threading.Thread(target=lambda: result.update(reply=client.chat.completions.create(**CHAT)))
        worker.start()
        time.sleep(0.5)
        assert "reply" not in result
        admin.post("/api/gateway/resume", json={}).raise_for_status()
        worker.join(timeout=30)
    assert result["reply"].choices[0].message.content == fake.calls[-1].response["choices"][0]["message"]["content"]
    assert len(gateway.server.store.list_model_calls(attempt.rollout_id)) == 1


async def test_call_in_flight_during_pause_completes_and_drain_waits_for_it(gateway, attempt, fake):
    # The upstream answers only when the test says so: a timed latency raced the pause on a loaded CI machine.
    fake.faults.hold = release = threading.Event()
    client = openai.AsyncOpenAI(base_url=attempt.base_url, api_key=attempt.token, max_retries=0)
    async with httpx.AsyncClient(base_url=gateway.url, headers=gateway.server.admin_headers(), timeout=30) as admin:
        call = asyncio.create_task(client.chat.completions.create(**CHAT, stream=True))
        await _until_in_flight(gateway)
        await admin.post("/api/gateway/pause")
        drain = asyncio.create_task(admin.post("/api/gateway/drain", json={"timeout_s": 30}))
        await asyncio.sleep(0.2)
        assert not drain.done(), "drain returned while a call was still in flight"
        release.set()
        drained = (await drain).json()
        assert drained["drained"] is True and drained["in_flight_at_start"] == 1 and drained["waited_s"] > 0
        stream = await call
        text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
        assert text == fake.calls[-1].response["choices"][0]["message"]["content"]
        resumed = (await admin.post("/api/gateway/resume", json={"weights_changed": True})).json()
    assert resumed["policy_version"] == 1 and resumed["paused"] is False
    fake.faults.hold = None
    await client.chat.completions.create(**CHAT)
    versions = [c.policy_version for c in gateway.server.store.list_model_calls(attempt.rollout_id)]
    assert versions == [0, 1]
    await client.close()


def test_drain_reports_a_timeout_when_calls_outlast_it(gateway, attempt, fake):
    fake.faults.hold = release = threading.Event()  # the call outlasts the drain whatever the machine's load
    worker = threading.Thread(
        target=lambda: openai.OpenAI(base_url=attempt.base_url, api_key=attempt.token).chat.completions.create(**CHAT)
    )
    worker.start()
    asyncio.run(_until_in_flight(gateway))
    with _admin(gateway) as admin:
        admin.post("/api/gateway/pause")
        drained = admin.post("/api/gateway/drain", json={"timeout_s": 0.2}).json()
        assert drained == {**drained, "drained": False, "in_flight_at_start": 1}
        release.set()
        worker.join(timeout=30)
        status = admin.get("/api/gateway/status").json()
        assert status["in_flight"] == 0 and status["paused"] is True
        admin.post("/api/gateway/resume").raise_for_status()


def test_resume_to_an_explicit_policy_version(gateway):
    with _admin(gateway) as admin:
        resumed = admin.post("/api/gateway/resume", json={"weights_changed": True, "policy_version": 3}).json()
        assert resumed["policy_version"] == 3
        stale = admin.post("/api/gateway/resume", json={"weights_changed": True, "policy_version": 2})
        assert stale.status_code == 409 and "older" in stale.json()["error"]["message"]
        unflagged = admin.post("/api/gateway/resume", json={"policy_version": 7})
        assert unflagged.status_code == 400 and "weights_changed" in unflagged.json()["error"]["message"]
    assert gateway.server.store.current_policy_version() == 3


@pytest.mark.parametrize("path", ["/api/gateway/pause", "/api/gateway/drain", "/api/gateway/resume"])
def test_admin_routes_need_the_admin_key(gateway, attempt, path):
    assert httpx.post(f"{gateway.url}{path}").status_code == 401
    resp = httpx.post(f"{gateway.url}{path}", headers={"authorization": f"Bearer {attempt.token}"})
    assert resp.status_code == 403


def test_typed_client_drives_a_weight_update(gateway, attempt, fake):
    from alight.client import AlightClient

    with AlightClient(gateway.url, admin_key=gateway.server.admin_key) as client:
        assert client.pause_gateway()["paused"] is True
        assert client.drain_gateway(timeout_s=5)["drained"] is True
        resumed = client.resume_gateway(weights_changed=True, metadata={"step": 1})
        assert resumed["paused"] is False and resumed["policy_version"] == 1
        status = client.gateway_status()
    assert status["upstreams"][0]["id"] == "u1" and status["policy_version"] == 1


def test_client_leaving_mid_stream_frees_its_in_flight_slot(gateway, attempt, fake):
    client = openai.OpenAI(base_url=attempt.base_url, api_key=attempt.token, max_retries=0)
    stream = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "word " * 400}], stream=True
    )
    next(iter(stream))
    stream.close()
    gate = gateway.server.app.state.gateway.gate
    deadline = time.monotonic() + 10
    while gate.in_flight and time.monotonic() < deadline:
        time.sleep(0.05)
    assert gate.in_flight == 0
