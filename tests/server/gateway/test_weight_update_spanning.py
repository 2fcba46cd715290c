"""A call that outlasts the drain of a weight update (asynchronous training): let through, marked, attributed."""

from __future__ import annotations

import threading
import time

import openai
import pytest

from alight.client import AlightClient
from alight_server.gateway.capture.record import SPANNED_WEIGHT_UPDATE
from alight_server.trainer.run.weight_sync import WeightSync

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}


def _until_in_flight(gateway, timeout_s: float = 20) -> None:
    gate = gateway.server.app.state.gateway.gate
    deadline = time.monotonic() + timeout_s
    while gate.in_flight == 0:
        assert time.monotonic() < deadline, "the call never reached the gateway"
        time.sleep(0.01)


def _held_call(gateway, attempt, fake) -> tuple[threading.Event, threading.Thread, dict]:
    """A call the upstream answers only once the returned event is set."""
    fake.faults.hold = release = threading.Event()
    client = openai.OpenAI(base_url=attempt.base_url, api_key=attempt.token, max_retries=0)
    result: dict = {}
    worker = threading.Thread(target=lambda: result.update(reply=client.chat.completions.create(**CHAT)))
    worker.start()
    _until_in_flight(gateway)
    return release, worker, result


def test_a_call_outlasting_the_drain_finishes_marked_with_the_version_that_admitted_it(gateway, attempt, fake):
    release, worker, result = _held_call(gateway, attempt, fake)
    with AlightClient(gateway.url, admin_key=gateway.server.admin_key) as admin:
        sync = WeightSync(admin)
        sync.allow_late_calls(0.2)
        version, _ = sync.paused(lambda v: None)  # new weights go in while the call is still running
        assert version == 1 and sync.last_drain is not None
        assert sync.last_drain.timed_out and sync.last_drain.in_flight_at_pause == 1
        release.set()
        worker.join(timeout=30)
        fake.faults.hold = None
        assert result["reply"].choices[0].message.content == fake.calls[-1].response["choices"][0]["message"]["content"]
        openai.OpenAI(base_url=attempt.base_url, api_key=attempt.token).chat.completions.create(**CHAT)
    calls = gateway.server.store.list_model_calls(attempt.rollout_id)
    assert [(c.policy_version, c.flags) for c in calls] == [(0, [SPANNED_WEIGHT_UPDATE]), (1, [])]


def test_without_late_calls_a_drain_timeout_leaves_the_weights_as_they_were(gateway, attempt, fake):
    release, worker, _ = _held_call(gateway, attempt, fake)
    loaded: list[int] = []
    with AlightClient(gateway.url, admin_key=gateway.server.admin_key) as admin:
        sync = WeightSync(admin, drain_timeout_s=0.2)
        with pytest.raises(RuntimeError, match="still in flight"):
            sync.paused(loaded.append)
        release.set()
        worker.join(timeout=30)
        assert loaded == [] and admin.gateway_status()["policy_version"] == 0
    (call,) = gateway.server.store.list_model_calls(attempt.rollout_id)
    assert call.policy_version == 0 and call.flags == []
