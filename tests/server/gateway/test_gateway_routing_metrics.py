"""Sticky routing across upstreams, rebalancing when one leaves, and the Prometheus metrics."""

from __future__ import annotations

import httpx

from alight.schemas import UpstreamCreate
from alight_server.stacks.server_thread import ServerThread
from alight_testing import create_fake_upstream

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}


def _call(a) -> None:
    httpx.post(
        f"{a.base_url}/chat/completions", headers={"authorization": f"Bearer {a.token}"}, json=CHAT
    ).raise_for_status()


def test_attempts_stick_to_one_upstream_and_move_only_when_theirs_leaves(gateway, fake):
    second = create_fake_upstream(model="fake-policy")
    with ServerThread(second) as url:
        gateway.server.store.add_upstream(UpstreamCreate(id="u2", url=url + "/v1", model="fake-policy"))
        gw = gateway.server.app.state.gateway
        gw.upstreams.invalidate()
        attempts = gateway.start_attempts(12)
        for _ in range(3):
            for a in attempts:
                _call(a)
        homes = {}
        for a in attempts:
            used = {c.upstream for c in gateway.server.store.list_model_calls(a.rollout_id)}
            assert len(used) == 1, f"attempt {a.rollout_id} spread over {used}"
            homes[a.rollout_id] = used.pop()
        assert set(homes.values()) == {"u1", "u2"}
        gateway.server.store.remove_upstream("u2")
        gw.upstreams.invalidate()
        for a in attempts:
            _call(a)
    for a in attempts:
        last = gateway.server.store.list_model_calls(a.rollout_id)[-1]
        assert last.upstream == "u1"


def test_metrics_count_calls_tokens_and_rejections(gateway, attempt, fake):
    _call(attempt)
    httpx.post(f"{attempt.base_url}/chat/completions", json=CHAT)  # no token
    text = httpx.get(f"{gateway.url}/metrics").text
    [call] = gateway.server.store.list_model_calls(attempt.rollout_id)
    assert 'alight_gateway_calls_total{flavour="chat",status="200"} 1.0' in text
    assert f'alight_gateway_tokens_captured_total{{kind="response"}} {float(len(call.response_token_ids))}' in text
    assert 'alight_gateway_rejected_total{reason="401"} 1.0' in text
    assert "alight_gateway_in_flight 0.0" in text
    assert "alight_gateway_call_latency_seconds_bucket" in text
    assert "alight_gateway_paused_seconds" in text
