"""Bad requests get an OpenAI-shaped 4xx naming the problem, through the real client."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest
from inference_testkit import AUTH, MODEL

from alight_server.inference.engine import InferenceEngine

HELLO = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"temperature": 3.5}, "temperature must be between 0 and 2; got 3.5"),
        ({"top_p": 0}, "top_p must be in (0, 1]"),
        ({"n": 64}, "n must be between 1 and 8"),
        ({"max_tokens": 0}, "max_tokens must be at least 1"),
        ({"max_tokens": 100_000}, "maximum context length is 2048 tokens"),
        ({"top_logprobs": 50, "logprobs": True}, "top_logprobs must be between 0 and 20"),
        ({"seed": 2**70}, "seed must fit in a signed 64-bit integer"),
        ({"messages": []}, "messages is empty"),
        ({"messages": [{"role": "wizard", "content": "hi"}]}, "messages[0] has role 'wizard'"),
        ({"messages": [{"role": "user"}]}, "messages[0] (user) has no content"),
        ({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, "content part of type 'image_url'"),
        ({"messages": "hello"}, "invalid request body at messages"),
    ],
)
def test_invalid_chat_requests_are_400s_naming_the_problem(
    client: openai.OpenAI, change: dict[str, Any], message: str
) -> None:
    kwargs: dict[str, Any] = {"model": MODEL, "messages": HELLO, "max_tokens": 4, **change}
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(**kwargs)
    assert message in caught.value.message


def test_a_prompt_longer_than_the_context_is_a_400(client: openai.OpenAI, engine: InferenceEngine) -> None:
    too_long = [7] * (engine.max_model_len + 1)
    with pytest.raises(openai.BadRequestError, match="maximum context length"):
        client.completions.create(model=MODEL, prompt=too_long, max_tokens=1)


def test_an_unknown_model_is_a_400_naming_the_served_one(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError, match="serves 'tiny'"):
        client.chat.completions.create(model="gpt-4o", messages=HELLO)  # type: ignore[arg-type]


def test_out_of_vocabulary_prompt_ids_are_a_400(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError, match="prompt token ids must be in"):
        client.completions.create(model=MODEL, prompt=[10**7], max_tokens=1)


def test_a_stream_that_cannot_start_fails_before_any_event(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError, match="temperature"):
        client.chat.completions.create(model=MODEL, messages=HELLO, temperature=-1, stream=True)  # type: ignore[arg-type]


def test_error_bodies_have_the_openai_shape(server_url: str) -> None:
    response = httpx.post(
        f"{server_url}/v1/chat/completions", json={"model": MODEL, "messages": HELLO, "n": 0}, headers=AUTH
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error == {"message": error["message"], "type": "invalid_request_error", "param": "n", "code": 400}


def test_an_unknown_model_names_its_code_in_the_one_error_shape(server_url: str) -> None:
    response = httpx.post(
        f"{server_url}/v1/chat/completions", json={"model": "gpt-4o", "messages": HELLO}, headers=AUTH
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error == {"message": error["message"], "type": "invalid_request_error", "param": "model",
                     "code": "model_not_found"}  # fmt: skip


def test_a_body_that_is_not_json_is_a_400(server_url: str) -> None:
    response = httpx.post(
        f"{server_url}/v1/chat/completions", content=b"{nope", headers={"content-type": "application/json", **AUTH}
    )
    assert response.status_code == 400
    assert "error" in response.json()
