"""The fake upstream itself: vLLM's response shapes, determinism, and exact stream/non-stream agreement."""

from __future__ import annotations

import httpx
import pytest

from alight_server.stacks.server_thread import ServerThread
from alight_testing import create_fake_upstream
from alight_testing.fake_model import FakeTokenizer


@pytest.fixture(scope="module")
def fake_url():
    with ServerThread(create_fake_upstream(model="toy")) as url:
        yield url + "/v1"


def _sse(resp: httpx.Response) -> list[dict]:
    import json

    return [json.loads(line[6:]) for line in resp.text.splitlines() if line.startswith("data: {")]


BODY = {
    "model": "toy",
    "messages": [{"role": "user", "content": "hello world"}],
    "logprobs": True,
    "return_token_ids": True,
}


def test_chat_response_carries_vllm_token_fields(fake_url):
    out = httpx.post(f"{fake_url}/chat/completions", json=BODY).json()
    choice = out["choices"][0]
    assert len(choice["token_ids"]) == len(choice["logprobs"]["content"]) == out["usage"]["completion_tokens"]
    assert len(out["prompt_token_ids"]) == out["usage"]["prompt_tokens"]
    assert "".join(e["token"] for e in choice["logprobs"]["content"]) == choice["message"]["content"]


def test_same_request_gives_the_same_answer(fake_url):
    a = httpx.post(f"{fake_url}/chat/completions", json=BODY).json()
    b = httpx.post(f"{fake_url}/chat/completions", json=BODY).json()
    assert a["choices"][0]["token_ids"] == b["choices"][0]["token_ids"]


def test_stream_agrees_with_the_plain_response(fake_url):
    plain = httpx.post(f"{fake_url}/chat/completions", json=BODY).json()
    chunks = _sse(httpx.post(f"{fake_url}/chat/completions", json={**BODY, "stream": True}))
    assert chunks[0]["prompt_token_ids"] == plain["prompt_token_ids"]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    ids = [i for c in chunks[1:] for i in c["choices"][0]["token_ids"]]
    assert ids == plain["choices"][0]["token_ids"]
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


def test_token_fields_only_when_asked(fake_url):
    out = httpx.post(f"{fake_url}/chat/completions", json={"model": "toy", "messages": BODY["messages"]}).json()
    assert out["prompt_token_ids"] is None and out["choices"][0]["token_ids"] is None
    assert out["choices"][0]["logprobs"] is None


def test_max_tokens_and_stop(fake_url):
    cut = httpx.post(f"{fake_url}/chat/completions", json={**BODY, "max_tokens": 2}).json()["choices"][0]
    assert cut["finish_reason"] == "length" and len(cut["token_ids"]) == 2
    stopped = httpx.post(f"{fake_url}/chat/completions", json={**BODY, "stop": [" world"]}).json()["choices"][0]
    assert stopped["stop_reason"] == " world" and not stopped["message"]["content"].endswith("world")


def test_unknown_model_is_a_vllm_style_404(fake_url):
    resp = httpx.post(f"{fake_url}/chat/completions", json={**BODY, "model": "other"})
    assert resp.status_code == 404 and resp.json()["error"]["code"] == 404


def test_tokenizer_round_trips_text():
    tok = FakeTokenizer()
    text = "<|im_start|>user\n  two  spaces and\ttabs<|im_end|>"
    assert "".join(tok.pieces(text)) == text
    assert tok.encode(text)[0] == 1
