"""Who may call which gateway URL, and what bad requests get back (4xx naming the problem, no record)."""

from __future__ import annotations

import httpx
import pytest

from alight.schemas import AttemptFinish, Mode, RolloutState
from alight_server.http.auth import issue_attempt_token

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}


def _post(url: str, token: str | None, **kw) -> httpx.Response:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    return httpx.post(url, headers=headers, **kw)


def _error(resp: httpx.Response, status: int) -> str:
    assert resp.status_code == status, resp.text
    return resp.json()["error"]["message"]


def test_missing_and_forged_tokens_are_401(gateway, attempt):
    url = f"{attempt.base_url}/chat/completions"
    assert "missing API key" in _error(_post(url, None, json=CHAT), 401)
    assert "signature" in _error(_post(url, attempt.token[:-3] + "abc", json=CHAT), 401)
    assert "not an alight attempt token" in _error(_post(url, "sk-something", json=CHAT), 401)


def test_expired_token_is_401(gateway, attempt):
    stale = issue_attempt_token(gateway.server.app.state.token_secret, attempt.rollout_id, 1, ttl_s=-1)
    assert "expired" in _error(_post(f"{attempt.base_url}/chat/completions", stale, json=CHAT), 401)


def test_token_of_another_attempt_is_refused_on_this_attempts_url(gateway):
    mine, other = gateway.start_attempts(2)
    resp = _post(f"{mine.base_url}/chat/completions", other.token, json=CHAT)
    assert "belongs to rollout" in _error(resp, 403)
    assert gateway.server.store.list_model_calls(mine.rollout_id) == []


def test_plain_v1_url_attributes_the_call_by_token(gateway, fake):
    a, b = gateway.start_attempts(2)
    assert _post(f"{gateway.url}/v1/chat/completions", b.token, json=CHAT).status_code == 200
    assert gateway.server.store.list_model_calls(a.rollout_id) == []
    assert len(gateway.server.store.list_model_calls(b.rollout_id)) == 1


def test_finished_rollout_takes_no_more_calls(gateway, attempt):
    gateway.server.store.finish_attempt(attempt.rollout_id, 1, AttemptFinish(status="succeeded"))
    gateway.server.app.state.gateway.attempts.forget(attempt.rollout_id)
    assert "succeeded" in _error(_post(f"{attempt.base_url}/chat/completions", attempt.token, json=CHAT), 409)


def test_cancelled_rollout_takes_no_more_calls(gateway, attempt):
    gateway.server.store.transition(attempt.rollout_id, RolloutState.CANCELLED)
    gateway.server.app.state.gateway.attempts.forget(attempt.rollout_id)
    assert "cancelled" in _error(_post(f"{attempt.base_url}/chat/completions", attempt.token, json=CHAT), 409)


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "must be a JSON object"),
        (b'{"model": "m"}', "`messages` must be a non-empty list"),
        (b'{"model": "m", "messages": [], "n": 0}', "`messages`"),
        (b'{"model": "m", "messages": [{"role": "user", "content": "x"}], "n": 0}', "`n` must be"),
        (b'{"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": "yes"}', "`stream`"),
    ],
)
def test_malformed_chat_bodies_are_400_and_not_recorded(gateway, attempt, fake, body, needle):
    resp = _post(f"{attempt.base_url}/chat/completions", attempt.token, content=body)
    assert needle in _error(resp, 400)
    assert fake.calls == [] and gateway.server.store.list_model_calls(attempt.rollout_id) == []


def test_bad_responses_and_completions_inputs_are_400(gateway, attempt):
    url = attempt.base_url
    assert "`input`" in _error(_post(f"{url}/responses", attempt.token, json={"model": "m", "input": 3}), 400)
    web = {"model": "m", "input": "hi", "tools": [{"type": "mcp_gateway"}]}  # hosted ones are left out, not refused
    assert "only function and namespace tools" in _error(_post(f"{url}/responses", attempt.token, json=web), 400)
    assert "`prompt`" in _error(
        _post(f"{url}/completions", attempt.token, json={"model": "m", "prompt": ["a", "b"]}), 400
    )
    bad_logprobs = {"model": "m", "prompt": "x", "logprobs": "many"}
    assert "`logprobs`" in _error(_post(f"{url}/completions", attempt.token, json=bad_logprobs), 400)
    bad_chat = {**CHAT, "logprobs": "yes"}
    assert "`logprobs`" in _error(_post(f"{url}/chat/completions", attempt.token, json=bad_chat), 400)


def test_oversize_body_is_413(gateway, attempt):
    gateway.server.app.state.gateway.max_body_bytes = 1000
    big = {"model": "m", "messages": [{"role": "user", "content": "x" * 5000}]}
    assert "limit" in _error(_post(f"{attempt.base_url}/chat/completions", attempt.token, json=big), 413)


def test_unknown_gateway_route_is_404(gateway, attempt):
    resp = _post(f"{attempt.base_url}/embeddings", attempt.token, json={"input": "x"})
    assert resp.status_code == 404 and "error" in resp.json()


def test_models_lists_the_served_model_for_a_valid_token_only(gateway, attempt):
    resp = httpx.get(f"{attempt.base_url}/models", headers={"authorization": f"Bearer {attempt.token}"})
    assert [m["id"] for m in resp.json()["data"]] == [gateway.upstream.model]
    assert httpx.get(f"{gateway.url}/v1/models").status_code == 401


def test_val_rollouts_sample_at_the_val_temperature(gateway, fake):
    val = gateway.start_attempt(mode=Mode.VAL)
    assert _post(f"{val.base_url}/chat/completions", val.token, json={**CHAT, "temperature": 0.9}).status_code == 200
    assert fake.calls[-1].request["temperature"] == gateway.server.config.gateway.val_temperature


def test_traceparent_links_the_call_to_the_callers_span(gateway, attempt, fake):
    trace, span = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    headers = {"authorization": f"Bearer {attempt.token}", "traceparent": f"00-{trace}-{span}-01"}
    httpx.post(f"{attempt.base_url}/chat/completions", headers=headers, json=CHAT).raise_for_status()
    [call] = gateway.server.store.list_model_calls(attempt.rollout_id)
    assert (call.trace_id, call.span_id) == (trace, span)


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("responses", {"model": "m", "input": "hi", "tools": 5}),
        ("responses", {"model": "m", "input": "hi", "text": "plain"}),
        ("responses", {"model": "m", "input": [{"type": "function_call_output", "output": 3}]}),
        ("messages", {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}], "tools": 5}),
        ("messages", {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": [1, 2]}]}),
    ],
)
def test_wrongly_shaped_translated_requests_are_400_not_500(gateway, attempt, path, body):
    resp = _post(f"{attempt.base_url}/{path}", attempt.token, json=body)
    assert resp.status_code == 400, resp.text
