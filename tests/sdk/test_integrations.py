"""What the framework integrations share: the gateway their clients call and the clip of long span values."""

from __future__ import annotations

import pytest

from alight import envvars
from alight.integrations import MAX_ATTRIBUTE_CHARS, clip_attribute, gateway_endpoint


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in envvars.ALL:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_an_attempt_names_its_gateway_and_token(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv(envvars.ALIGHT_ROLLOUT_ID, "r1")
    clean_env.setenv(envvars.ALIGHT_GATEWAY_URL, "http://127.0.0.1:9/gw/r1/1/v1")
    clean_env.setenv(envvars.ALIGHT_TOKEN, "alt1.token")
    assert gateway_endpoint() == ("http://127.0.0.1:9/gw/r1/1/v1", "alt1.token")


def test_an_attempt_without_a_token_still_gives_a_non_empty_key(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv(envvars.ALIGHT_ROLLOUT_ID, "r1")
    clean_env.setenv(envvars.ALIGHT_GATEWAY_URL, "http://127.0.0.1:9/gw/r1/1/v1")
    assert gateway_endpoint() == ("http://127.0.0.1:9/gw/r1/1/v1", "alight")


def test_outside_a_rollout_there_is_no_gateway(clean_env: pytest.MonkeyPatch) -> None:
    assert gateway_endpoint() is None


def test_a_value_within_the_limit_is_kept_whole() -> None:
    assert clip_attribute("x" * MAX_ATTRIBUTE_CHARS) == "x" * MAX_ATTRIBUTE_CHARS


def test_a_longer_value_keeps_its_head_and_says_how_much_was_cut() -> None:
    assert clip_attribute("abcdef", limit=4) == "abcd...[2 more chars]"
