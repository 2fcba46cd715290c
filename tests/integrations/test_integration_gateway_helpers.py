"""The per-framework helpers that point explicitly built model clients at the attempt's gateway."""

from __future__ import annotations

from typing import Any

import pytest
from agents.models import _openai_shared
from autogen_core.models import UserMessage

import alight_autogen
import alight_langchain
import alight_openai_agents
from alight import envvars

TOKEN = "alt1.test-token"


@pytest.fixture
def attempt_env(fake_upstream: tuple[str, Any], monkeypatch: pytest.MonkeyPatch) -> Any:
    """The environment of an attempt whose 'gateway' is the fake upstream, so calls really go out."""
    base_url, upstream = fake_upstream
    for name in envvars.ALL:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(envvars.ALIGHT_ROLLOUT_ID, "r-helpers")
    monkeypatch.setenv(envvars.ALIGHT_ATTEMPT, "1")
    monkeypatch.setenv(envvars.ALIGHT_GATEWAY_URL, base_url)
    monkeypatch.setenv(envvars.ALIGHT_TOKEN, TOKEN)
    upstream.calls.clear()
    return upstream


@pytest.fixture
def no_attempt_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in envvars.ALL:
        monkeypatch.delenv(name, raising=False)


def _authorizations(upstream: Any) -> list[str]:
    return [call.headers.get("authorization", "") for call in upstream.calls]


def test_langchain_model_goes_to_the_gateway_with_the_attempt_token(attempt_env) -> None:
    reply = alight_langchain.gateway_chat_model("fake").invoke("hello")
    assert "hello" in str(reply.content)
    assert _authorizations(attempt_env) == [f"Bearer {TOKEN}"]


async def test_autogen_client_goes_to_the_gateway_with_the_attempt_token(attempt_env) -> None:
    result = await alight_autogen.gateway_model_client("fake").create([UserMessage(content="hello", source="user")])
    assert "hello" in str(result.content)
    assert _authorizations(attempt_env) == [f"Bearer {TOKEN}"]


async def test_agents_sdk_default_client_becomes_the_gateway_and_back(attempt_env) -> None:
    before = _openai_shared.get_default_openai_client()
    try:
        client = alight_openai_agents.use_gateway()
        assert client is not None and _openai_shared.get_default_openai_client() is client
        await client.chat.completions.create(model="fake", messages=[{"role": "user", "content": "hello"}])
        assert _authorizations(attempt_env) == [f"Bearer {TOKEN}"]
    finally:
        _openai_shared._default_openai_client = before


def test_outside_a_rollout_the_helpers_change_nothing(no_attempt_env) -> None:
    before = _openai_shared.get_default_openai_client()
    assert alight_openai_agents.use_gateway() is None
    assert _openai_shared.get_default_openai_client() is before
    llm = alight_langchain.gateway_chat_model("m", base_url="http://mine/v1", api_key="k")
    assert llm.openai_api_base == "http://mine/v1" and llm.openai_api_key is not None
    assert llm.openai_api_key.get_secret_value() == "k"
    client = alight_autogen.gateway_model_client("m", base_url="http://mine/v1", api_key="k")
    assert client._client.base_url == "http://mine/v1/"  # no public accessor
