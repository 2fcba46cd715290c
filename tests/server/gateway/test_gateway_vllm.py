"""Against a real vLLM server (optional): token ids through the gateway are vLLM's own, and the fake's shapes match.

Run with a vLLM serving a small model, e.g. (see docs/gateway.md):
    ALIGHT_TEST_VLLM_URL=http://127.0.0.1:8911/v1 .venv/bin/pytest tests/server/gateway -m vllm
"""

from __future__ import annotations

import json
import os

import httpx
import openai
import pytest

from alight.schemas import Mode
from alight_server.stacks.server_thread import ServerThread
from alight_testing import create_fake_upstream

VLLM_URL = os.environ.get("ALIGHT_TEST_VLLM_URL")
pytestmark = [
    pytest.mark.vllm,
    pytest.mark.skipif(not VLLM_URL, reason="set ALIGHT_TEST_VLLM_URL to a vLLM server's /v1 URL"),
]
MESSAGES = [{"role": "user", "content": "Say hello."}]


@pytest.fixture
def vllm_attempt(gateway):
    if gateway.upstream.kind != "vllm":
        pytest.skip("runs on the vllm upstream only")
    return gateway.start_attempt(mode=Mode.VAL)  # val: temperature 0, so streamed and not agree


def _detokenize(ids: list[int], model: str) -> str:
    base = str(VLLM_URL).rstrip("/").removesuffix("/v1")
    return httpx.post(f"{base}/detokenize", json={"model": model, "tokens": ids}, timeout=30).json()["prompt"]


def test_vllm_token_ids_are_captured_through_the_gateway(gateway, vllm_attempt):
    client = openai.OpenAI(base_url=vllm_attempt.base_url, api_key=vllm_attempt.token, max_retries=0)
    plain = client.chat.completions.create(model="any", messages=MESSAGES, max_tokens=8)
    streamed = "".join(
        c.choices[0].delta.content or ""
        for c in client.chat.completions.create(model="any", messages=MESSAGES, max_tokens=8, stream=True)
        if c.choices
    )
    calls = gateway.server.store.list_model_calls(vllm_attempt.rollout_id)
    assert len(calls) == 2
    for call in calls:
        assert call.flags == [] and call.prompt_token_ids
        assert len(call.response_token_ids) == len(call.response_logprobs) > 0
    assert calls[0].response_token_ids == calls[1].response_token_ids
    assert plain.choices[0].message.content == streamed
    text = _detokenize(calls[0].response_token_ids, gateway.upstream.model)
    assert text.startswith(streamed) or streamed.startswith(text.rstrip())


def _keys(obj, prefix=""):
    """Every key path in a JSON object, lists collapsed to their first element."""
    out = set()
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.add(prefix + k)
            out |= _keys(v, prefix + k + ".")
    elif isinstance(obj, list) and obj:
        out |= _keys(obj[0], prefix + "[].")
    return out


SHAPE_FIELDS = {
    "prompt_token_ids",
    "choices",
    "choices.[].token_ids",
    "choices.[].logprobs.content.[].logprob",
    "choices.[].logprobs.content.[].token",
    "choices.[].logprobs.content.[].bytes",
    "choices.[].logprobs.content.[].top_logprobs",
    "choices.[].finish_reason",
    "choices.[].message.content",
    "usage.prompt_tokens",
    "usage.completion_tokens",
}


def test_fake_upstream_answers_in_vllms_shape():
    body = {"messages": MESSAGES, "max_tokens": 4, "logprobs": True, "return_token_ids": True}
    base = str(VLLM_URL).rstrip("/")
    model = httpx.get(f"{base}/models", timeout=10).json()["data"][0]["id"]
    real = httpx.post(f"{base}/chat/completions", json={**body, "model": model}, timeout=60).json()
    with ServerThread(create_fake_upstream(model="toy")) as url:
        fake = httpx.post(f"{url}/v1/chat/completions", json={**body, "model": "toy"}).json()
        fake_chunks = _chunks(httpx.post(f"{url}/v1/chat/completions", json={**body, "model": "toy", "stream": True}))
    real_chunks = _chunks(
        httpx.post(f"{base}/chat/completions", json={**body, "model": model, "stream": True}, timeout=60)
    )
    assert _keys(real) >= SHAPE_FIELDS and _keys(fake) >= SHAPE_FIELDS
    assert _keys(real_chunks[0]) == _keys(fake_chunks[0])  # role chunk with prompt_token_ids
    # vLLM may send `delta: {}` for a token that ends mid-character, so only `delta` itself is required.
    token_chunk = {"choices.[].token_ids", "choices.[].delta", "choices.[].logprobs.content.[].logprob"}
    assert token_chunk <= _keys(real_chunks[1]) and token_chunk <= _keys(fake_chunks[1])


def _chunks(resp: httpx.Response) -> list[dict]:
    return [json.loads(line[6:]) for line in resp.text.splitlines() if line.startswith("data: {")]


def test_responses_and_messages_streams_on_vllm_record_vllms_tokens(gateway, vllm_attempt):
    import anthropic

    client = openai.OpenAI(base_url=vllm_attempt.base_url, api_key=vllm_attempt.token, max_retries=0)
    with client.responses.stream(model="any", input="Say hello.", max_output_tokens=8) as stream:
        last = list(stream)[-1]  # response.incomplete when the 8 tokens run out, as OpenAI's API does
    assert last.type in ("response.completed", "response.incomplete")
    response_text = last.response.output_text
    claude = anthropic.Anthropic(base_url=vllm_attempt.anthropic_base_url, api_key=vllm_attempt.token, max_retries=0)
    with claude.messages.stream(model="any", max_tokens=8, messages=MESSAGES) as stream:
        message_text = "".join(stream.text_stream)
    responses_call, messages_call = gateway.server.store.list_model_calls(vllm_attempt.rollout_id)
    for call, text in ((responses_call, response_text), (messages_call, message_text)):
        assert call.flags == [] and len(call.response_token_ids) == len(call.response_logprobs) > 0
        assert _detokenize(call.response_token_ids, gateway.upstream.model).strip() == text.strip()
