"""The Responses API through the gateway: translated to chat upstream, faithful back to the client."""

from __future__ import annotations

import json

import openai
import pytest

from alight.schemas import ApiFlavour

TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    "strict": True,
}


def _client(attempt) -> openai.OpenAI:
    return openai.OpenAI(base_url=attempt.base_url, api_key=attempt.token, max_retries=0)


@pytest.mark.harness(harness="openai client", api="responses", streamed=False, tools=False)
def test_responses_call_returns_upstream_text_and_records_token_ids(gateway, attempt, fake):
    resp = _client(attempt).responses.create(model="gpt-5", instructions="Be brief.", input="Name a colour.")
    produced = fake.calls[-1].response
    assert resp.output_text == produced["choices"][0]["message"]["content"]
    assert resp.usage is not None and resp.usage.output_tokens == produced["usage"]["completion_tokens"]
    sent = fake.calls[-1].request["messages"]
    assert sent == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name a colour."}]
    [call] = gateway.server.store.list_model_calls(attempt.rollout_id)
    assert call.flavour == ApiFlavour.RESPONSES
    assert call.request["input"] == "Name a colour."
    assert call.response_token_ids == produced["choices"][0]["token_ids"]
    assert call.prompt_token_ids == produced["prompt_token_ids"]


@pytest.mark.harness(harness="openai client", api="responses", streamed=True, tools=False)
def test_streamed_responses_emit_the_event_sequence_and_final_response(gateway, attempt, fake):
    with _client(attempt).responses.stream(model="gpt-5", input="Say something nice") as stream:
        events = list(stream)
        final = stream.get_final_response()
    kinds = [e.type for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    produced = fake.calls[-1].response["choices"][0]
    assert deltas == final.output_text == produced["message"]["content"]
    [call] = gateway.server.store.list_model_calls(attempt.rollout_id)
    assert call.streamed and call.response_token_ids == produced["token_ids"]
    assert call.response["output"][0]["content"][0]["text"] == deltas


@pytest.mark.harness(harness="openai client", api="responses", streamed=False, tools=True)
def test_responses_function_call_loop(gateway, attempt, fake):
    client = _client(attempt)
    first = client.responses.create(model="m", input='call get_weather {"city": "Oslo"}', tools=[TOOL])
    [fc] = [o for o in first.output if o.type == "function_call"]
    assert fc.name == "get_weather" and json.loads(fc.arguments) == {"city": "Oslo"}
    follow_up = [
        {"role": "user", "content": 'call get_weather {"city": "Oslo"}'},
        {"type": "function_call", "call_id": fc.call_id, "name": fc.name, "arguments": fc.arguments},
        {"type": "function_call_output", "call_id": fc.call_id, "output": "rain, 4C"},
    ]
    second = client.responses.create(model="m", input=follow_up, tools=[TOOL])
    assert second.output_text.endswith("Tool results: rain, 4C")
    sent = fake.calls[-1].request["messages"]
    assert sent[1]["tool_calls"][0]["id"] == fc.call_id and sent[2] == {
        "role": "tool",
        "tool_call_id": fc.call_id,
        "content": "rain, 4C",
    }


@pytest.mark.harness(harness="openai client", api="responses", streamed=True, tools=True)
def test_streamed_function_call_arguments(gateway, attempt, fake):
    with _client(attempt).responses.stream(model="m", input="call get_weather", tools=[TOOL]) as stream:
        events = list(stream)
        final = stream.get_final_response()
    args = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
    [fc] = [o for o in final.output if o.type == "function_call"]
    assert json.loads(args) == json.loads(fc.arguments) == {"city": "x"}
    done = [e for e in events if e.type == "response.function_call_arguments.done"]
    assert done[0].arguments == args


def test_previous_response_id_is_refused_with_a_reason(gateway, attempt, fake):
    try:
        _client(attempt).responses.create(model="m", input="hi", previous_response_id="resp_123")
        raise AssertionError("expected a 400")
    except openai.BadRequestError as exc:
        assert "previous_response_id" in str(exc)
    assert fake.calls == []
