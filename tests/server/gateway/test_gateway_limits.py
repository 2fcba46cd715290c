"""Budgets and rate limits at the gateway, felt by the real openai, anthropic and Agents SDK clients.

Each test starts a server whose gateway.limits it names (indirect `server_config`), in front of the fake
upstream, and calls it over loopback HTTP with the SDKs' own retry logic on; the SDKs' requests and answers
are seen through their httpx event hooks.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from typing import Any
from unittest.mock import ANY

import anthropic
import httpx
import openai
import pytest

from alight.schemas import AttemptStatus, FailureKind, RewardCreate, RolloutCreate, RolloutState
from alight_server.config import GatewayConfig, GatewayLimits, ServerConfig
from alight_server.http.auth import issue_attempt_token
from tests.server.gateway.conftest import AttemptUnderTest, GatewayUnderTest

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}
RUN_DIR = "/runs/pilot"
RPM = 30  # a bucket of 30 requests, refilled one every 2 s


@pytest.fixture
def server_config(server_config: ServerConfig, request: pytest.FixtureRequest) -> ServerConfig:
    limits = GatewayLimits.model_validate(request.param)
    return server_config.model_copy(update={"gateway": GatewayConfig(limits=limits)})


def limited(limits: dict) -> pytest.MarkDecorator:
    return pytest.mark.parametrize("server_config", [limits], indirect=True)


def start(gateway: GatewayUnderTest, n: int = 1) -> list[AttemptUnderTest]:
    """n attempts of rollouts in the run folder RUN_DIR (what alight train puts in their metadata)."""
    store = gateway.server.store
    created = store.create_rollouts([RolloutCreate(task={"i": i}, metadata={"run_dir": RUN_DIR}) for i in range(n)])
    claimed = store.claim_attempts(limit=n, ids=[r.id for r in created])
    secret = gateway.server.app.state.token_secret
    return [
        AttemptUnderTest(r.id, a, issue_attempt_token(secret, r.id, a, ttl_s=3600), gateway.url) for r, a in claimed
    ]


class Seen:
    """The statuses (and Retry-After) of every HTTP answer an SDK client received, retries included."""

    def __init__(self) -> None:
        self.answers: list[tuple[int, str | None]] = []
        self.at: list[float] = []  # when each answer arrived

    def hook(self, response: Any) -> None:
        self.answers.append((response.status_code, response.headers.get("retry-after-ms")))
        self.at.append(time.monotonic())

    async def ahook(self, response: Any) -> None:
        self.hook(response)

    def client(self, sdk: Any = openai) -> Any:
        """The SDK's own HTTP client (httpx2 for these SDK versions), watched."""
        return sdk.DefaultHttpxClient(event_hooks={"response": [self.hook]})

    def async_client(self) -> Any:
        return openai.DefaultAsyncHttpxClient(event_hooks={"response": [self.ahook]})


def drain_run_bucket(gateway: GatewayUnderTest, attempt: AttemptUnderTest, messages: bool = False) -> httpx.Response:
    """Call (chat completions, or Anthropic messages) until the run's request bucket answers 429; that answer."""
    url, headers = f"{attempt.base_url}/chat/completions", {"authorization": f"Bearer {attempt.token}"}
    if messages:
        url, headers = f"{attempt.base_url}/messages", {"x-api-key": attempt.token}
    with httpx.Client(headers=headers, timeout=30) as http:
        for _ in range(RPM * 2):
            resp = http.post(url, json=CHAT)
            if resp.status_code != 200:
                return resp
    raise AssertionError(f"{RPM * 2} calls and no 429 from a run limited to {RPM} requests a minute")


def until_limited(seen: Seen, call: Callable[[], Any]) -> tuple[Any, list[int], list[tuple[float, float, str]]]:
    """Make SDK calls until one meets a 429 (a busy machine may refill the bucket after the drain): that call's
    result, the statuses it saw (its retries included), and (answered at, next sent at, Retry-After ms) per 429."""
    for _ in range(RPM * 2):
        first = len(seen.answers)
        result = call()
        answers, at = seen.answers[first:], seen.at[first:]
        if any(status == 429 for status, _ in answers):
            waits = [(a, b, ms or "0") for (_, ms), a, b in zip(answers, at, at[1:], strict=False)]
            return result, [status for status, _ in answers], waits
    raise AssertionError(f"{RPM * 2} SDK calls and none met the run's rate limit")


def metric(gateway: GatewayUnderTest, name: str, limit: str) -> float:
    text = httpx.get(f"{gateway.url}/metrics").text
    found = re.search(rf'^{name}_total{{limit="{limit}",run="{RUN_DIR}"}} (\S+)$', text, re.M)
    return float(found.group(1)) if found else 0.0


@limited({"run": {"requests_per_minute": RPM}})
def test_run_over_its_request_rate_gets_openais_429_with_retry_after(gateway, fake):
    (attempt,) = start(gateway)
    resp = drain_run_bucket(gateway, attempt)
    assert resp.status_code == 429
    assert 0 < int(resp.headers["retry-after-ms"]) <= 2000 and int(resp.headers["retry-after"]) >= 1
    assert "x-should-retry" not in resp.headers
    error = resp.json()["error"]
    assert (error["type"], error["code"]) == ("requests", "rate_limit_exceeded")
    assert RUN_DIR in error["message"] and "gateway.limits.run" in error["message"]
    assert len(fake.calls) >= RPM  # the refused call never reached the upstream
    assert metric(gateway, "alight_gateway_rate_limited", "run_requests") == 1


@limited({"run": {"requests_per_minute": RPM}})
def test_openai_sdk_retries_the_rate_limit_after_retry_after_and_succeeds(gateway, fake):
    (attempt,) = start(gateway)
    drain_run_bucket(gateway, attempt)
    seen = Seen()
    client = openai.OpenAI(base_url=attempt.base_url, api_key=attempt.token, max_retries=3, http_client=seen.client())
    reply, statuses, waits = until_limited(seen, lambda: client.chat.completions.create(**CHAT))
    assert reply.choices[0].message.content == fake.calls[-1].response["choices"][0]["message"]["content"]
    assert statuses[-1] == 200 and set(statuses[:-1]) == {429}, statuses  # retried on its own, then answered
    for answered, next_answered, wait_ms in waits:
        assert next_answered - answered >= int(wait_ms) / 1000 - 0.01  # it waited the Retry-After before retrying
    refused = 1 + statuses.count(429)  # the drain's and the SDK's
    assert metric(gateway, "alight_gateway_rate_limited", "run_requests") == refused


@limited({"run": {"requests_per_minute": RPM}})
def test_anthropic_sdk_retries_the_rate_limit_on_messages_and_succeeds(gateway, fake):
    (attempt,) = start(gateway)
    refused = drain_run_bucket(gateway, attempt, messages=True)
    assert refused.status_code == 429 and int(refused.headers["retry-after-ms"]) > 0
    assert refused.json() == {"type": "error", "error": {"type": "rate_limit_error", "message": ANY}}
    seen = Seen()
    client = anthropic.Anthropic(
        base_url=attempt.anthropic_base_url, api_key=attempt.token, max_retries=3, http_client=seen.client(anthropic)
    )
    messages = [{"role": "user", "content": "hi"}]
    reply, statuses, _ = until_limited(seen, lambda: client.messages.create(model="m", max_tokens=8, messages=messages))
    assert reply.content[0].text == fake.calls[-1].response["choices"][0]["message"]["content"]
    assert statuses[-1] == 200 and set(statuses[:-1]) == {429}, statuses


@limited({"run": {"requests_per_minute": RPM}})
def test_an_agents_sdk_agent_hits_the_rate_limit_and_recovers(gateway, fake):
    agents = pytest.importorskip("agents")
    (attempt,) = start(gateway)
    drain_run_bucket(gateway, attempt)
    seen = Seen()

    async def run() -> str:
        client = openai.AsyncOpenAI(
            base_url=attempt.base_url, api_key=attempt.token, max_retries=3, http_client=seen.async_client()
        )
        model = agents.OpenAIChatCompletionsModel(model="m", openai_client=client)
        agent = agents.Agent(name="pilot", instructions="Answer briefly.", model=model)
        result = await agents.Runner.run(agent, "hi", run_config=agents.RunConfig(tracing_disabled=True))
        return result.final_output

    output, statuses, _ = until_limited(seen, lambda: asyncio.run(run()))
    assert output == fake.calls[-1].response["choices"][0]["message"]["content"]
    assert statuses[-1] == 200 and set(statuses[:-1]) == {429}, statuses


@limited({"attempt": {"calls": 2}})
def test_attempt_past_its_call_budget_gets_insufficient_quota_which_the_openai_sdk_does_not_retry(gateway, fake):
    (attempt,) = start(gateway)
    seen = Seen()
    client = openai.OpenAI(base_url=attempt.base_url, api_key=attempt.token, max_retries=3, http_client=seen.client())
    for _ in range(2):
        client.chat.completions.create(**CHAT)
    with pytest.raises(openai.RateLimitError) as raised:
        client.chat.completions.create(**CHAT)
    assert raised.value.code == "insufficient_quota" and raised.value.type == "insufficient_quota"
    assert "budget of 2 calls" in raised.value.message
    assert [status for status, _ in seen.answers] == [200, 200, 429]  # not retried
    assert len(fake.calls) == 2
    (breach,) = gateway.server.store.list_events(attempt.rollout_id, kind="budget_exceeded")
    assert breach.attempt == attempt.attempt and breach.payload["limit"] == "calls"
    assert metric(gateway, "alight_gateway_budget_refusals", "calls") == 1


@limited({"attempt": {"tokens": 1}})
def test_attempt_past_its_token_budget_gets_anthropics_spend_limit_error_not_retried(gateway, fake):
    (attempt,) = start(gateway)
    seen = Seen()
    client = anthropic.Anthropic(
        base_url=attempt.anthropic_base_url, api_key=attempt.token, max_retries=3, http_client=seen.client(anthropic)
    )
    messages = [{"role": "user", "content": "hi"}]
    client.messages.create(model="m", max_tokens=8, messages=messages)  # admitted with nothing spent yet
    with pytest.raises(anthropic.BadRequestError) as raised:
        client.messages.create(model="m", max_tokens=8, messages=messages)
    error = raised.value.body["error"]
    assert error["type"] == "invalid_request_error"
    assert error["message"].startswith("You have reached your specified API usage limits")
    assert "gateway.limits.attempt.tokens" in error["message"]
    assert [status for status, _ in seen.answers] == [200, 400]
    assert len(fake.calls) == 1


@limited({"attempt": {"wall_s": 0.001}})
def test_attempt_past_its_wall_time_is_refused(gateway, fake):
    (attempt,) = start(gateway)
    client = openai.OpenAI(base_url=attempt.base_url, api_key=attempt.token, max_retries=3)
    with pytest.raises(openai.RateLimitError, match=r"budget of 0\.001 wall seconds"):
        client.chat.completions.create(**CHAT)
    assert fake.calls == []


@limited({"attempt": {"calls": 1}})
def test_attempt_that_exhausted_its_budget_ends_budget_exceeded_with_reward_0(gateway, fake, admin_client):
    (attempt,) = start(gateway)
    client = openai.OpenAI(base_url=attempt.base_url, api_key=attempt.token, max_retries=0)
    client.chat.completions.create(**CHAT)
    with pytest.raises(openai.RateLimitError):
        client.chat.completions.create(**CHAT)
    rollout, n = attempt.rollout_id, attempt.attempt
    # The agent reports a reward of 1 and success, as an agent that swallowed the refusal would.
    gateway.server.store.add_reward(rollout, RewardCreate(attempt=n, value=1.0, final=True))
    finish = {"status": "succeeded", "exit_code": 0}
    done = admin_client.post(f"/api/rollouts/{rollout}/attempts/{n}/finish", json=finish)
    assert done.status_code == 200, done.text
    ended = done.json()
    assert ended["state"] == RolloutState.FAILED  # a task failure: final, not retried as infra would be
    (row,) = ended["attempts"]
    assert (row["status"], row["failure_kind"]) == (AttemptStatus.FAILED, FailureKind.BUDGET)
    assert "budget of 1 calls" in row["message"] and "its runner reported succeeded" in row["message"]
    trajectory = admin_client.get(f"/api/rollouts/{rollout}/trajectory").json()
    assert trajectory["final_reward"] == 0.0 and trajectory["failure_kind"] == "budget_exceeded"
    again = admin_client.post(f"/api/rollouts/{rollout}/attempts/{n}/finish", json=finish)
    assert again.status_code == 200  # the controller's retried report matches what was recorded


@limited({"attempt": {"calls": 5}})
def test_attempt_within_its_budget_ends_as_its_runner_reported(gateway, fake, admin_client):
    (attempt,) = start(gateway)
    openai.OpenAI(base_url=attempt.base_url, api_key=attempt.token).chat.completions.create(**CHAT)
    path = f"/api/rollouts/{attempt.rollout_id}/attempts/{attempt.attempt}/finish"
    ended = admin_client.post(path, json={"status": "succeeded", "exit_code": 0}).json()
    assert ended["state"] == RolloutState.SUCCEEDED and ended["attempts"][0]["failure_kind"] is None


@limited({"upstreams": {"u1": {"requests_per_minute": RPM}}})
def test_upstream_over_its_rate_is_refused_and_the_call_is_not_charged_to_the_attempt(gateway, fake):
    (attempt,) = start(gateway)
    resp = drain_run_bucket(gateway, attempt)
    assert resp.status_code == 429 and resp.json()["error"]["code"] == "rate_limit_exceeded"
    assert "upstream u1" in resp.json()["error"]["message"]
    assert metric(gateway, "alight_gateway_rate_limited", "upstream_requests") == 1
    spent = gateway.server.app.state.gateway.limits._attempts[(attempt.rollout_id, attempt.attempt)]
    assert spent.calls == len(fake.calls)


@limited({"run": {"tokens_per_minute": 60}})
def test_run_over_its_token_rate_is_refused_until_its_debt_is_repaid(gateway, fake):
    (attempt,) = start(gateway)
    resp = drain_run_bucket(gateway, attempt)  # each answered call's tokens come off the bucket of 60
    error = resp.json()["error"]
    assert resp.status_code == 429 and (error["type"], error["code"]) == ("tokens", "rate_limit_exceeded")
    calls = gateway.server.store.list_model_calls(attempt.rollout_id)
    spent = sum(len(c.prompt_token_ids) + len(c.response_token_ids) for c in calls)
    # 1 token a second: the wait is the debt past the bucket of 60 (plus the 1 token a call needs), less the refill.
    assert 0 < int(resp.headers["retry-after-ms"]) / 1000 <= spent - 59 + 0.01
    assert metric(gateway, "alight_gateway_rate_limited", "run_tokens") == 1
