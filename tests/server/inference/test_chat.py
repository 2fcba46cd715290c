"""Chat completions through the real openai client: token ids, logprobs, sampling, streaming, versions."""

from __future__ import annotations

from typing import Any

import openai
import pytest
import torch
from inference_testkit import MODEL, forward_logprobs, render

from alight_server.inference.engine import InferenceEngine

HELLO: list[Any] = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Tell me about Paris."}]
TOKEN_IDS = {"return_token_ids": True}


def test_prompt_token_ids_equal_the_encoding_of_the_rendered_template(
    client: openai.OpenAI, engine: InferenceEngine
) -> None:
    response = client.chat.completions.create(model=MODEL, messages=HELLO, max_tokens=4, extra_body=TOKEN_IDS)
    assert response.model_extra is not None
    assert response.model_extra["prompt_token_ids"] == render(engine.tokenizer, HELLO)


def test_response_token_ids_decode_to_the_returned_text(client: openai.OpenAI, engine: InferenceEngine) -> None:
    response = client.chat.completions.create(
        model=MODEL, messages=HELLO, max_tokens=24, temperature=0, extra_body=TOKEN_IDS
    )
    choice = response.choices[0]
    ids = choice.model_extra["token_ids"]  # pyright: ignore[reportOptionalSubscript]
    assert len(ids) == response.usage.completion_tokens  # pyright: ignore[reportOptionalMemberAccess]
    assert engine.tokenizer.decode(ids, skip_special_tokens=True) == choice.message.content


def test_returned_logprobs_equal_a_fresh_forward_pass(client: openai.OpenAI, engine: InferenceEngine) -> None:
    response = client.chat.completions.create(
        model=MODEL, messages=HELLO, max_tokens=16, temperature=1.0, seed=3, logprobs=True, extra_body=TOKEN_IDS
    )
    ids = response.choices[0].model_extra["token_ids"]  # pyright: ignore[reportOptionalSubscript]
    served = torch.tensor([t.logprob for t in response.choices[0].logprobs.content])  # pyright: ignore[reportOptionalMemberAccess,reportOptionalIterable]
    expected = forward_logprobs(engine.model, response.model_extra["prompt_token_ids"], ids)  # pyright: ignore[reportOptionalSubscript]
    torch.testing.assert_close(served, expected, atol=1e-4, rtol=1e-4)


def test_logprobs_ignore_temperature_and_report_the_raw_distribution(client: openai.OpenAI) -> None:
    def first_logprob(temperature: float) -> float:
        response = client.chat.completions.create(
            model=MODEL, messages=HELLO, max_tokens=1, temperature=temperature, seed=1, logprobs=True, top_logprobs=1
        )
        top = response.choices[0].logprobs.content[0].top_logprobs[0]  # pyright: ignore[reportOptionalMemberAccess,reportOptionalSubscript]
        return top.logprob

    assert first_logprob(0.2) == pytest.approx(first_logprob(1.5), abs=1e-6)


def test_top_logprobs_are_sorted_and_contain_the_greedy_token(client: openai.OpenAI) -> None:
    response = client.chat.completions.create(
        model=MODEL, messages=HELLO, max_tokens=5, temperature=0, logprobs=True, top_logprobs=4
    )
    for entry in response.choices[0].logprobs.content or []:  # pyright: ignore[reportOptionalMemberAccess]
        values = [t.logprob for t in entry.top_logprobs]
        assert len(values) == 4 and values == sorted(values, reverse=True)
        assert entry.logprob == pytest.approx(values[0])


def test_stream_assembles_to_the_same_tokens_and_text_as_non_stream(client: openai.OpenAI) -> None:
    kwargs = dict(model=MODEL, messages=HELLO, max_tokens=20, temperature=0, logprobs=True, extra_body=TOKEN_IDS)
    whole = client.chat.completions.create(**kwargs)  # type: ignore[arg-type]
    chunks = list(client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kwargs))  # type: ignore[arg-type]
    assert chunks[0].model_extra["prompt_token_ids"] == whole.model_extra["prompt_token_ids"]  # pyright: ignore[reportOptionalSubscript]
    assert all("prompt_token_ids" not in (c.model_extra or {}) for c in chunks[1:])
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    ids = [t for c in chunks if c.choices for t in (c.choices[0].model_extra or {}).get("token_ids", [])]
    logprobs = [
        e.logprob for c in chunks if c.choices and c.choices[0].logprobs for e in c.choices[0].logprobs.content or []
    ]
    assert content == whole.choices[0].message.content
    assert ids == whole.choices[0].model_extra["token_ids"]  # pyright: ignore[reportOptionalSubscript]
    assert logprobs == pytest.approx([e.logprob for e in whole.choices[0].logprobs.content])  # pyright: ignore[reportOptionalIterable,reportOptionalMemberAccess]
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == len(ids)


def test_seeded_choices_are_reproducible_and_differ_from_each_other(client: openai.OpenAI) -> None:
    def sample() -> list[str | None]:
        response = client.chat.completions.create(model=MODEL, messages=HELLO, max_tokens=12, n=3, seed=11)
        return [c.message.content for c in sorted(response.choices, key=lambda c: c.index)]

    first = sample()
    assert first == sample()
    assert len(set(first)) == 3


def test_top_p_near_zero_is_greedy(client: openai.OpenAI) -> None:
    greedy = client.chat.completions.create(model=MODEL, messages=HELLO, max_tokens=10, temperature=0)
    nucleus = client.chat.completions.create(model=MODEL, messages=HELLO, max_tokens=10, top_p=1e-6, seed=5)
    assert nucleus.choices[0].message.content == greedy.choices[0].message.content


def test_stop_string_ends_the_text_before_it(client: openai.OpenAI) -> None:
    full = client.chat.completions.create(model=MODEL, messages=HELLO, max_tokens=24, temperature=0).choices[0]
    text = full.message.content or ""
    stop = text[6:9]
    stopped = client.chat.completions.create(model=MODEL, messages=HELLO, max_tokens=24, temperature=0, stop=[stop])
    assert stopped.choices[0].finish_reason == "stop"
    assert stopped.choices[0].message.content == text[: text.index(stop)]


def test_max_tokens_ends_with_finish_reason_length(client: openai.OpenAI) -> None:
    response = client.chat.completions.create(
        model=MODEL, messages=HELLO, max_tokens=3, extra_body={"ignore_eos": True}
    )
    assert response.choices[0].finish_reason == "length"
    assert response.usage is not None and response.usage.completion_tokens == 3


def test_eos_token_is_in_token_ids_but_not_in_text(engine: InferenceEngine) -> None:
    from alight_server.inference.sampling import SamplingParams

    ids = render(engine.tokenizer, HELLO)
    # Sample until some choice ends on EOS; the random tiny model emits one within a few hundred tokens.
    results = engine.generate(ids, SamplingParams(max_tokens=400, temperature=1.5, n=8, seed=2))
    stopped = [r for r in results if r.finish_reason == "stop"]
    assert stopped, "no choice reached EOS; raise max_tokens"
    assert stopped[0].token_ids[-1] in engine.eos_token_ids
    assert engine.tokenizer.decode(stopped[0].token_ids, skip_special_tokens=True) == stopped[0].text


def test_token_ids_are_absent_unless_requested(client: openai.OpenAI) -> None:
    response = client.chat.completions.create(model=MODEL, messages=HELLO, max_tokens=2)
    assert "prompt_token_ids" not in (response.model_extra or {})
    assert "token_ids" not in (response.choices[0].model_extra or {})


def test_every_response_carries_the_policy_version(client: openai.OpenAI, engine: InferenceEngine) -> None:
    raw = client.chat.completions.with_raw_response.create(model=MODEL, messages=HELLO, max_tokens=2)
    assert raw.headers["x-alight-policy-version"] == str(engine.version)
    assert raw.parse().system_fingerprint == f"alight-policy-{engine.version}"


def test_models_and_health_report_the_served_model(client: openai.OpenAI, server_url: str) -> None:
    import httpx

    assert [m.id for m in client.models.list()] == [MODEL]
    health = httpx.get(f"{server_url}/healthz").json()
    assert health["status"] == "ok" and health["model"] == MODEL
