"""The anthropic client's Messages API through the gateway, streamed and not, with tools."""

from __future__ import annotations

import anthropic
import pytest

from alight.schemas import ApiFlavour

TOOL = {
    "name": "lookup",
    "description": "Look a word up",
    "input_schema": {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]},
}


def _client(attempt) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=attempt.anthropic_base_url, api_key=attempt.token, max_retries=0)


@pytest.mark.harness(harness="anthropic client", api="messages", streamed=False, tools=False)
def test_message_returns_upstream_text_and_records_token_ids(gateway, attempt, fake):
    msg = _client(attempt).messages.create(
        model="claude-sonnet-4-5",
        max_tokens=64,
        system="You are terse.",
        messages=[{"role": "user", "content": "Define entropy."}],
    )
    produced = fake.calls[-1].response
    assert msg.content[0].type == "text" and msg.content[0].text == produced["choices"][0]["message"]["content"]
    assert msg.stop_reason == "end_turn"
    assert msg.usage.input_tokens == len(produced["prompt_token_ids"])
    [call] = gateway.server.store.list_model_calls(attempt.rollout_id)
    assert call.flavour == ApiFlavour.MESSAGES
    assert call.response_token_ids == produced["choices"][0]["token_ids"]
    assert fake.calls[-1].request["messages"][0] == {"role": "system", "content": "You are terse."}


@pytest.mark.harness(harness="anthropic client", api="messages", streamed=True, tools=False)
def test_streamed_message_text_and_stop_reason(gateway, attempt, fake):
    with _client(attempt).messages.stream(
        model="claude", max_tokens=64, messages=[{"role": "user", "content": "Write a haiku about rain"}]
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    produced = fake.calls[-1].response["choices"][0]
    assert text == produced["message"]["content"] == final.content[0].text
    assert final.stop_reason == "end_turn"
    [call] = gateway.server.store.list_model_calls(attempt.rollout_id)
    assert call.streamed and call.response_token_ids == produced["token_ids"]


@pytest.mark.harness(harness="anthropic client", api="messages", streamed=False, tools=True)
def test_tool_use_loop_with_tool_result(gateway, attempt, fake):
    client = _client(attempt)
    messages: list = [{"role": "user", "content": 'call lookup {"word": "gateway"}'}]
    first = client.messages.create(model="claude", max_tokens=64, messages=messages, tools=[TOOL])
    [use] = [b for b in first.content if b.type == "tool_use"]
    assert first.stop_reason == "tool_use" and use.name == "lookup" and use.input == {"word": "gateway"}
    messages += [
        {"role": "assistant", "content": [b.model_dump() for b in first.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "a door"}]},
    ]
    second = client.messages.create(model="claude", max_tokens=64, messages=messages, tools=[TOOL])
    assert second.content[0].text.endswith("Tool results: a door")


@pytest.mark.harness(harness="anthropic client", api="messages", streamed=True, tools=True)
def test_streamed_tool_use_input_json(gateway, attempt, fake):
    with _client(attempt).messages.stream(
        model="claude", max_tokens=64, messages=[{"role": "user", "content": "call lookup"}], tools=[TOOL]
    ) as stream:
        final = stream.get_final_message()
    [use] = [b for b in final.content if b.type == "tool_use"]
    assert use.input == {"word": "x"} and final.stop_reason == "tool_use"


def test_missing_max_tokens_is_an_anthropic_shaped_400(gateway, attempt, fake):
    import httpx

    resp = httpx.post(
        f"{attempt.anthropic_base_url}/v1/messages",
        headers={"x-api-key": attempt.token},
        json={"model": "claude", "messages": [{"role": "user", "content": "hi"}]},
    )
    assert resp.status_code == 400
    assert resp.json()["type"] == "error" and "max_tokens" in resp.json()["error"]["message"]
