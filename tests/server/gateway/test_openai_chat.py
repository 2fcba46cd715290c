"""The openai client, unmodified, through the gateway: chat and completions, sync, async, streamed, tools."""

from __future__ import annotations

import json

import openai
import pytest

from alight.schemas import ApiFlavour


def _client(attempt) -> openai.OpenAI:
    return openai.OpenAI(base_url=attempt.base_url, api_key=attempt.token, max_retries=0)


@pytest.mark.harness(harness="openai client", api="chat", streamed=False, tools=False)
def test_chat_call_returns_upstream_answer_and_records_its_token_ids(gateway, attempt, fake):
    reply = _client(attempt).chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "What is two plus two?"}]
    )
    produced = fake.calls[-1].response
    assert reply.choices[0].message.content == produced["choices"][0]["message"]["content"]
    [call] = gateway.server.store.list_model_calls(attempt.rollout_id, attempt.attempt)
    assert call.flavour == ApiFlavour.CHAT
    assert call.prompt_token_ids == produced["prompt_token_ids"]
    assert call.response_token_ids == produced["choices"][0]["token_ids"]
    assert call.response_logprobs == [e["logprob"] for e in produced["choices"][0]["logprobs"]["content"]]
    assert call.status_code == 200 and call.flags == [] and not call.streamed


def test_gateway_forces_training_fields_and_maps_the_model_name(gateway, attempt, fake):
    _client(attempt).chat.completions.create(
        model="gpt-4o-mini", temperature=0.2, messages=[{"role": "user", "content": "hi"}]
    )
    sent = fake.calls[-1].request
    assert sent["model"] == "fake-policy"
    assert sent["temperature"] == gateway.server.config.gateway.train_temperature
    assert sent["logprobs"] is True and sent["return_token_ids"] is True


def test_agent_does_not_see_fields_only_training_asked_for(gateway, attempt, fake):
    reply = _client(attempt).chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
    raw = reply.model_dump()
    assert raw["choices"][0]["logprobs"] is None
    assert "token_ids" not in raw["choices"][0] and "prompt_token_ids" not in raw
    assert raw["model"] == "gpt-4o-mini"


@pytest.mark.harness(harness="openai client", api="chat", streamed=True, tools=False)
def test_streamed_chat_delivers_every_chunk_and_records_the_whole_call(gateway, attempt, fake):
    stream = _client(attempt).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "tell me a short story please"}], stream=True
    )
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    produced = fake.calls[-1].response
    assert text == produced["choices"][0]["message"]["content"]
    [call] = gateway.server.store.list_model_calls(attempt.rollout_id)
    assert call.streamed
    assert call.response_token_ids == produced["choices"][0]["token_ids"]
    assert call.prompt_token_ids == produced["prompt_token_ids"]
    assert call.response["choices"][0]["message"]["content"] == text


async def test_async_client_calls_are_captured(gateway, attempt, fake):
    client = openai.AsyncOpenAI(base_url=attempt.base_url, api_key=attempt.token, max_retries=0)
    replies = [
        await client.chat.completions.create(model="m", messages=[{"role": "user", "content": f"question {i}"}])
        for i in range(3)
    ]
    calls = gateway.server.store.list_model_calls(attempt.rollout_id, attempt.attempt)
    assert [c.seq for c in calls] == [0, 1, 2]
    assert [c.response["choices"][0]["message"]["content"] for c in calls] == [
        r.choices[0].message.content for r in replies
    ]
    await client.close()


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two integers",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
            },
        },
    }
]


@pytest.mark.harness(harness="openai client", api="chat", streamed=False, tools=True)
def test_tool_loop_round_trips_tool_calls_and_results(gateway, attempt, fake):
    client = _client(attempt)
    messages = [{"role": "user", "content": 'Please call add {"a": 2, "b": 3}'}]
    first = client.chat.completions.create(model="m", messages=messages, tools=TOOLS)
    [tool_call] = first.choices[0].message.tool_calls or []
    assert first.choices[0].finish_reason == "tool_calls"
    assert json.loads(tool_call.function.arguments) == {"a": 2, "b": 3}
    messages.append(first.choices[0].message.model_dump(exclude_none=True))
    messages.append({"role": "tool", "tool_call_id": tool_call.id, "content": "5"})
    second = client.chat.completions.create(model="m", messages=messages, tools=TOOLS)
    assert second.choices[0].message.content.endswith("Tool results: 5")
    calls = gateway.server.store.list_model_calls(attempt.rollout_id)
    assert [c.response_token_ids for c in calls] == [f.response["choices"][0]["token_ids"] for f in fake.calls]


@pytest.mark.harness(harness="openai client", api="chat", streamed=True, tools=True)
def test_streamed_tool_call_arguments_arrive_whole(gateway, attempt, fake):
    stream = _client(attempt).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "call add"}], tools=TOOLS, stream=True
    )
    args, names = "", []
    for chunk in stream:
        for tc in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            names += [tc.function.name] if tc.function and tc.function.name else []
            args += (tc.function.arguments or "") if tc.function else ""
    assert names == ["add"] and json.loads(args) == {"a": 1, "b": 1}
    [call] = gateway.server.store.list_model_calls(attempt.rollout_id)
    assert call.response["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] == args
    assert call.response_token_ids == fake.calls[-1].response["choices"][0]["token_ids"]


def test_n_choices_are_all_recorded(gateway, attempt, fake):
    reply = _client(attempt).chat.completions.create(
        model="m", n=3, messages=[{"role": "user", "content": "pick a number"}], stream=False
    )
    assert len(reply.choices) == 3
    [call] = gateway.server.store.list_model_calls(attempt.rollout_id)
    produced = fake.calls[-1].response["choices"]
    assert call.response_token_ids == produced[0]["token_ids"]
    assert [c["token_ids"] for c in call.extra_choices] == [p["token_ids"] for p in produced[1:]]


@pytest.mark.harness(harness="openai client", api="completions", streamed=False, tools=False)
@pytest.mark.harness(harness="openai client", api="completions", streamed=True, tools=False)
def test_completions_streamed_and_not(gateway, attempt, fake):
    client = _client(attempt)
    plain = client.completions.create(model="m", prompt="Once upon a time", max_tokens=3)
    streamed = "".join(
        c.choices[0].text for c in client.completions.create(model="m", prompt="Once upon a time", stream=True)
    )
    calls = gateway.server.store.list_model_calls(attempt.rollout_id)
    assert [c.flavour for c in calls] == [ApiFlavour.COMPLETIONS] * 2
    assert plain.choices[0].text == fake.calls[0].response["choices"][0]["text"]
    assert streamed == fake.calls[1].response["choices"][0]["text"]
    for call, produced in zip(calls, fake.calls, strict=True):
        assert call.prompt_token_ids == produced.response["choices"][0]["prompt_token_ids"]
        assert call.response_token_ids == produced.response["choices"][0]["token_ids"]
        assert call.response_logprobs == produced.response["choices"][0]["logprobs"]["token_logprobs"]
