"""The gateway's ASGI layer: what it serves itself, what it leaves to FastAPI, and how it fails."""

from __future__ import annotations

import httpx

from alight_server.gateway.request.pipeline import CallPipeline

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}


def test_a_chunked_body_over_the_limit_is_413(gateway, attempt, fake):
    gateway.server.app.state.gateway.max_body_bytes = 1000

    def chunks():
        yield b'{"model": "m", "messages": [{"role": "user", "content": "'
        for _ in range(20):
            yield b"x" * 100
        yield b'"}]}'

    resp = httpx.post(
        f"{attempt.base_url}/chat/completions",
        headers={"authorization": f"Bearer {attempt.token}"},
        content=chunks(),
    )
    assert resp.status_code == 413 and "limit of 1000 bytes" in resp.json()["error"]["message"]
    assert fake.calls == [] and gateway.server.store.list_model_calls(attempt.rollout_id) == []


def test_requests_the_gateway_does_not_serve_reach_fastapi(gateway, attempt):
    auth = {"authorization": f"Bearer {attempt.token}"}
    wrong_method = httpx.post(f"{attempt.base_url}/models", headers=auth, json={})
    assert wrong_method.status_code == 405 and "not allowed" in wrong_method.json()["error"]["message"]
    bad_attempt = httpx.post(
        f"{gateway.url}/gw/{attempt.rollout_id}/first/v1/chat/completions", headers=auth, json=CHAT
    )
    assert bad_attempt.status_code == 422 and "attempt" in bad_attempt.json()["error"]["message"]
    traces = httpx.post(f"{gateway.url}/v1/traces", content=b"", headers={"content-type": "application/x-protobuf"})
    assert traces.status_code == 401  # OTLP ingest, not a model route


def test_agent_routes_stay_in_the_openapi_document(gateway):
    paths = gateway.server.app.openapi()["paths"]
    for route in ("chat/completions", "completions", "responses", "messages", "models"):
        assert f"/v1/{route}" in paths and f"/gw/{{rollout_id}}/{{attempt}}/v1/{route}" in paths


def test_a_bug_in_the_gateway_is_a_500_in_the_error_shape(gateway, attempt, monkeypatch):
    async def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(CallPipeline, "handle", broken)
    resp = httpx.post(
        f"{attempt.base_url}/chat/completions", headers={"authorization": f"Bearer {attempt.token}"}, json=CHAT
    )
    assert resp.status_code == 500
    assert "internal gateway error" in resp.json()["error"]["message"] and "boom" not in resp.text
    messages = httpx.post(f"{attempt.anthropic_base_url}/v1/messages", headers={"x-api-key": attempt.token}, json=CHAT)
    assert messages.status_code == 500 and messages.json()["type"] == "error"
