"""Text completions through the real openai client, with vLLM's per-choice token ids."""

from __future__ import annotations

import openai
import torch
from inference_testkit import MODEL, forward_logprobs

from alight_server.inference.engine import InferenceEngine

TOKEN_IDS = {"return_token_ids": True}


def test_completion_returns_prompt_and_response_ids_per_choice(client: openai.OpenAI, engine: InferenceEngine) -> None:
    response = client.completions.create(
        model=MODEL, prompt="The quick brown fox", max_tokens=8, n=2, seed=4, extra_body=TOKEN_IDS
    )
    expected_prompt = engine.tokenizer("The quick brown fox")["input_ids"]
    for choice in response.choices:
        extra = choice.model_extra or {}
        assert extra["prompt_token_ids"] == expected_prompt
        assert engine.tokenizer.decode(extra["token_ids"], skip_special_tokens=True) == choice.text


def test_a_token_id_prompt_is_used_verbatim(client: openai.OpenAI) -> None:
    response = client.completions.create(model=MODEL, prompt=[5, 6, 7, 8], max_tokens=2, extra_body=TOKEN_IDS)
    assert (response.choices[0].model_extra or {})["prompt_token_ids"] == [5, 6, 7, 8]


def test_completion_logprobs_match_a_forward_pass_and_list_top_alternatives(
    client: openai.OpenAI, engine: InferenceEngine
) -> None:
    response = client.completions.create(
        model=MODEL, prompt="Once upon a time", max_tokens=10, logprobs=3, seed=9, extra_body=TOKEN_IDS
    )
    choice = response.choices[0]
    extra = choice.model_extra or {}
    assert choice.logprobs is not None and choice.logprobs.token_logprobs is not None
    expected = forward_logprobs(engine.model, extra["prompt_token_ids"], extra["token_ids"])
    torch.testing.assert_close(torch.tensor(choice.logprobs.token_logprobs), expected, atol=1e-4, rtol=1e-4)
    assert all(len(top) <= 3 for top in choice.logprobs.top_logprobs or [])
    assert choice.logprobs.text_offset is not None and choice.logprobs.text_offset[0] == 0


def test_streamed_completion_sends_prompt_ids_first_and_token_ids_per_chunk(client: openai.OpenAI) -> None:
    kwargs = dict(model=MODEL, prompt="Hello there", max_tokens=12, temperature=0, extra_body=TOKEN_IDS)
    whole = client.completions.create(**kwargs)  # type: ignore[arg-type]
    chunks = list(client.completions.create(stream=True, **kwargs))  # type: ignore[arg-type]
    extras = [c.choices[0].model_extra or {} for c in chunks]
    assert extras[0]["prompt_token_ids"] == (whole.choices[0].model_extra or {})["prompt_token_ids"]
    assert all("prompt_token_ids" not in e for e in extras[1:])
    assert [t for e in extras for t in e["token_ids"]] == (whole.choices[0].model_extra or {})["token_ids"]
    assert "".join(c.choices[0].text for c in chunks) == whole.choices[0].text
