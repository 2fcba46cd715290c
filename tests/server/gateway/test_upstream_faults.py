"""Upstream failures: retried when retryable, reported in the OpenAI error shape, recorded, never hanging."""

from __future__ import annotations

import time

import httpx
import openai
import pytest

from alight.schemas import UpstreamCreate
from alight_server.stacks.server_thread import free_port


def _client(attempt, retries: int = 0) -> openai.OpenAI:
    return openai.OpenAI(base_url=attempt.base_url, api_key=attempt.token, max_retries=retries)


def _ask(attempt, **kw):
    return _client(attempt).chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], **kw)


def test_retryable_upstream_errors_are_retried_until_success(gateway, attempt, fake):
    fake.faults.fail_times, fake.faults.fail_status = 2, 503
    reply = _ask(attempt)
    assert len(fake.calls) == 3
    assert reply.choices[0].message.content == fake.calls[-1].response["choices"][0]["message"]["content"]
    [call] = gateway.server.store.list_model_calls(attempt.rollout_id)
    assert call.status_code == 200


def test_upstream_rate_limit_honours_its_retry_after(gateway, attempt, fake):
    fake.faults.fail_times, fake.faults.fail_status, fake.faults.retry_after_s = 1, 429, 0.05
    _ask(attempt)
    assert [c.status for c in fake.calls] == [429, 200]


def test_persistent_upstream_failure_is_a_recorded_502(gateway, attempt, fake):
    fake.faults.fail_times = 100
    with pytest.raises(openai.InternalServerError) as info:
        _ask(attempt)
    assert info.value.status_code == 502 and "answered 500" in info.value.message
    assert len(fake.calls) == gateway.server.config.gateway.max_retries + 1
    [call] = gateway.server.store.list_model_calls(attempt.rollout_id)
    assert call.status_code == 502 and "500" in (call.error or "")
    assert call.response_token_ids == [] and call.response is None


def test_upstream_client_error_passes_through_with_its_message(gateway, attempt, fake):
    fake.faults.fail_times, fake.faults.fail_status = 1, 400
    with pytest.raises(openai.BadRequestError) as info:
        _ask(attempt)
    assert "injected failure 400" in info.value.message
    assert len(fake.calls) == 1  # a 400 is not retried


def test_hung_upstream_times_out_at_the_configured_limit(gateway, attempt, fake):
    gateway.server.app.state.gateway.config.upstream_timeout_s = 0.5
    fake.faults.hang_s = 3
    began = time.monotonic()
    with pytest.raises(openai.APIStatusError) as info:
        _ask(attempt)
    assert info.value.status_code == 504 and time.monotonic() - began < 5
    [call] = gateway.server.store.list_model_calls(attempt.rollout_id)
    assert call.status_code == 504


def test_garbage_upstream_body_is_a_recorded_502(gateway, attempt, fake):
    fake.faults.garbage_times = 1
    with pytest.raises(openai.InternalServerError) as info:
        _ask(attempt)
    assert "not an OpenAI response" in info.value.message
    [call] = gateway.server.store.list_model_calls(attempt.rollout_id)
    assert call.status_code == 502 and call.response_token_ids == []


def test_stream_cut_mid_way_ends_in_an_error_event_and_no_partial_record(gateway, attempt, fake):
    fake.faults.stream_cut_times = 1
    stream = _ask(attempt, stream=True)
    with pytest.raises(openai.APIError) as info:
        for _ in stream:
            pass
    assert "before [DONE]" in str(info.value)
    [call] = gateway.server.store.list_model_calls(attempt.rollout_id)
    assert call.status_code == 502 and call.response is None and call.response_token_ids == []


def test_no_registered_upstream_is_a_clear_503(gateway, attempt):
    gateway.server.store.remove_upstream("u1")
    gateway.server.app.state.gateway.upstreams.invalidate()
    with pytest.raises(openai.APIStatusError) as info:
        _ask(attempt)
    assert info.value.status_code == 503 and "register one with POST /api/upstreams" in info.value.message


def test_unreachable_upstream_fails_over_to_a_live_one(gateway, attempt, fake):
    store = gateway.server.store
    store.add_upstream(UpstreamCreate(id="dead", url=f"http://127.0.0.1:{free_port()}/v1", model="x"))
    gateway.server.app.state.gateway.upstreams.invalidate()
    for i in range(4):  # whichever one an attempt prefers, every call lands
        _client(attempt).chat.completions.create(model="m", messages=[{"role": "user", "content": f"q{i}"}])
    assert {c.upstream for c in store.list_model_calls(attempt.rollout_id)} == {"u1"}


def test_raw_error_bodies_have_the_openai_shape(gateway, attempt, fake):
    fake.faults.fail_times = 100
    resp = httpx.post(
        f"{attempt.base_url}/chat/completions",
        headers={"authorization": f"Bearer {attempt.token}"},
        json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
    )
    error = resp.json()["error"]
    assert resp.status_code == 502 and set(error) == {"message", "type", "param", "code"}
