"""SDK fixtures: a claimed attempt on a live server, its environment applied, fresh OpenTelemetry globals."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from opentelemetry import trace
from opentelemetry.util._once import Once

from alight import envvars
from alight.schemas import AttemptStart, RolloutCreate
from alight_server.http.auth import derive_token_secret, issue_attempt_token


@pytest.fixture(autouse=True)
def fresh_otel_globals() -> Iterator[None]:
    """Each test may install a global TracerProvider; put the process back as it was afterwards."""
    saved = (trace._TRACER_PROVIDER, trace._TRACER_PROVIDER_SET_ONCE)
    trace._TRACER_PROVIDER = None
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    yield
    provider = trace._TRACER_PROVIDER
    shutdown = getattr(provider, "shutdown", None)
    if shutdown is not None:
        shutdown()
    trace._TRACER_PROVIDER, trace._TRACER_PROVIDER_SET_ONCE = saved


@dataclass
class ClaimedAttempt:
    start: AttemptStart
    env: dict[str, str]

    @property
    def rollout_id(self) -> str:
        return self.start.rollout.id


def claim_attempt(live_server, rollout_id: str, task: object) -> ClaimedAttempt:
    store = live_server.store
    store.create_rollouts([RolloutCreate(id=rollout_id, task=task)])
    [(rollout, attempt)] = store.claim_attempts(1, ids=[rollout_id])
    token = issue_attempt_token(derive_token_secret(live_server.admin_key), rollout_id, attempt, ttl_s=600)
    start = AttemptStart(
        rollout=rollout,
        attempt=attempt,
        token=token,
        gateway_base_url=envvars.gateway_url(live_server.url, rollout_id, attempt),
        otlp_traces_endpoint=envvars.otlp_traces_url(live_server.url),
    )
    return ClaimedAttempt(start=start, env=envvars.attempt_env(start, live_server.url))


@pytest.fixture
def no_alight_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in envvars.ALL:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def attempt(live_server, monkeypatch: pytest.MonkeyPatch, no_alight_env) -> ClaimedAttempt:
    """Attempt 1 of rollout 'r-sdk' (task {"n": 3}), its environment set as the controller would."""
    claimed = claim_attempt(live_server, "r-sdk", {"n": 3})
    for name, value in claimed.env.items():
        monkeypatch.setenv(name, value)
    return claimed
