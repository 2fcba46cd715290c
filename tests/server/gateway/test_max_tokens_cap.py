"""gateway.max_output_tokens: a training-time cap on every flavour's output budget, noted in the call record."""

from __future__ import annotations

from typing import Any

import anthropic
import openai
import pytest

from alight_server.gateway.request.pipeline import MAX_TOKENS_CAP

CAP = 8
HI = [{"role": "user", "content": "hi"}]


@pytest.fixture
def capped_gateway(gateway: Any) -> Any:
    gateway.server.app.state.gateway.config.max_output_tokens = CAP
    return gateway


def _openai(attempt: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=attempt.base_url, api_key=attempt.token, max_retries=0)


CALLS = {
    "chat with no budget": lambda a: _openai(a).chat.completions.create(model="m", messages=HI),
    "chat max_completion_tokens": lambda a: _openai(a).chat.completions.create(
        model="m", messages=HI, max_completion_tokens=1000
    ),
    "responses max_output_tokens": lambda a: _openai(a).responses.create(model="m", input="hi", max_output_tokens=1000),
    "messages max_tokens": lambda a: anthropic.Anthropic(
        base_url=a.anthropic_base_url, api_key=a.token, max_retries=0
    ).messages.create(model="m", max_tokens=1000, messages=HI),
}
ASKED = {"chat with no budget": None}


@pytest.mark.parametrize("case", list(CALLS))
def test_the_cap_lowers_every_flavours_output_budget_and_the_record_says_so(
    capped_gateway: Any, attempt: Any, fake: Any, case: str
) -> None:
    CALLS[case](attempt)
    [sent] = fake.calls
    assert max(sent.request.get("max_tokens") or 0, sent.request.get("max_completion_tokens") or 0) == CAP
    [call] = capped_gateway.server.store.list_model_calls(attempt.rollout_id)
    assert call.request[MAX_TOKENS_CAP] == {"cap": CAP, "asked": ASKED.get(case, 1000)}


def test_a_budget_under_the_cap_is_left_alone_and_unmarked(capped_gateway: Any, attempt: Any, fake: Any) -> None:
    _openai(attempt).chat.completions.create(model="m", messages=HI, max_tokens=4)
    assert fake.calls[0].request["max_tokens"] == 4
    [call] = capped_gateway.server.store.list_model_calls(attempt.rollout_id)
    assert MAX_TOKENS_CAP not in call.request
