"""Prompt-prefix reuse: an agent's calls share a system prompt and grow one conversation; reuse changes no output."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
from inference_testkit import MODEL, forward_logprobs

from alight_server.inference.engine import InferenceEngine
from alight_server.inference.prefix_cache import PrefixCache
from alight_server.inference.sampling import SamplingParams

SYSTEM = list(range(40, 100))  # a shared "system prompt"
PROMPTS = [[*SYSTEM, 7, 8, 9], [*SYSTEM, 11, 12], [*SYSTEM, 7, 8, 9, 30, 31, 32, 33]]


@pytest.fixture(scope="module")
def engines() -> Iterator[tuple[InferenceEngine, InferenceEngine]]:
    """(reusing prefixes, never reusing): own engines, since one of these tests changes weights."""
    with (
        InferenceEngine.from_model_name(MODEL, device="cpu") as reusing,
        InferenceEngine.from_model_name(MODEL, device="cpu", prefix_cache_tokens=0) as plain,
    ):
        plain.model.load_state_dict(reusing.model.state_dict())
        yield reusing, plain


def _run(engine: InferenceEngine, prompt: list[int], **params: object) -> tuple[list[int], list[float]]:
    (out,) = engine.generate(prompt, SamplingParams(max_tokens=8, **params))  # type: ignore[arg-type]
    return out.token_ids, out.logprobs


def test_reused_prefixes_give_the_same_tokens_and_logprobs_as_a_full_prefill(engines) -> None:
    reusing, plain = engines
    before = reusing.prefix_cache.hit_tokens
    for prompt in PROMPTS:
        for params in ({"temperature": 0.0}, {"temperature": 1.0, "seed": 3}):
            ids, logprobs = _run(reusing, prompt, **params)
            want_ids, want_logprobs = _run(plain, prompt, **params)
            assert ids == want_ids
            assert logprobs == pytest.approx(want_logprobs, abs=1e-4)
    # Every prompt after the first reused at least the shared system prompt.
    assert reusing.prefix_cache.hit_tokens - before >= len(SYSTEM) * (2 * len(PROMPTS) - 1)
    assert plain.prefix_cache.hit_tokens == 0


def test_recorded_logprobs_after_reuse_match_a_fresh_forward_pass(engines) -> None:
    reusing, _ = engines
    _run(reusing, PROMPTS[0], temperature=0.0)
    prompt = PROMPTS[2]  # shares PROMPTS[0] whole
    ids, logprobs = _run(reusing, prompt, temperature=1.0, seed=5)
    expected = forward_logprobs(reusing.model, prompt, ids)
    assert torch.tensor(logprobs) == pytest.approx(expected, abs=1e-4)


def test_a_weight_update_empties_the_cache_so_new_weights_answer(engines) -> None:
    reusing, plain = engines
    _run(reusing, PROMPTS[0], temperature=0.0)
    generator = torch.Generator().manual_seed(0)
    state = {k: v + 0.05 * torch.randn(v.shape, generator=generator) for k, v in reusing.model.state_dict().items()}
    reusing.update_weights(state)
    plain.update_weights(state)
    hits = reusing.prefix_cache.hit_tokens
    ids, logprobs = _run(reusing, PROMPTS[2], temperature=0.0)
    assert reusing.prefix_cache.hit_tokens == hits  # nothing computed with the old weights was reused
    want_ids, want_logprobs = _run(plain, PROMPTS[2], temperature=0.0)
    assert ids == want_ids
    assert logprobs == pytest.approx(want_logprobs, abs=1e-4)


def _layers(length: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    keys = torch.arange(length, dtype=torch.float32).reshape(1, 1, length, 1)
    return [(keys, keys.clone())]


def test_lookup_reuses_the_longest_common_prefix_but_never_the_last_prompt_token() -> None:
    cache = PrefixCache(max_tokens=100)
    cache.store([1, 2, 3, 4], _layers(4))
    cache.store([1, 2, 9], _layers(3))
    length, layers = cache.lookup([1, 2, 3, 5, 6])
    assert length == 3
    assert layers[0][0].shape[2] == 3
    length, _ = cache.lookup([1, 2, 3, 4])  # the whole prompt is cached: its last token still runs
    assert length == 3
    assert cache.lookup([8, 1, 2]) == (0, [])


def test_the_least_recently_used_prompts_go_when_the_token_budget_is_exceeded() -> None:
    cache = PrefixCache(max_tokens=10)
    cache.store([1, 2, 3, 4], _layers(4))
    cache.store([5, 6, 7, 8], _layers(4))
    cache.lookup([1, 2, 3, 4, 0])  # touch the first: the second is now the oldest
    cache.store([9, 10, 11, 12], _layers(4))
    assert cache.lookup([5, 6, 7, 8, 0])[0] == 0
    assert cache.lookup([1, 2, 3, 4, 0])[0] == 4
    assert cache.lookup([9, 10, 11, 12, 0])[0] == 4
