"""Dynamic batching: concurrent requests share decode steps without changing what each one gets."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import openai
import pytest
import torch
from inference_testkit import AUTH, MODEL, forward_logprobs

from alight_server.inference.engine import InferenceEngine
from alight_server.inference.generation import TokenEvent
from alight_server.inference.models import load_policy
from alight_server.inference.sampling import SamplingParams

PROMPTS = ["hello there", "The quick brown fox jumps over the lazy", "def add(a, b):", "One, two", "Paris"]


def test_greedy_output_with_batching_equals_greedy_output_alone(client: openai.OpenAI) -> None:
    def complete(prompt: str) -> str:
        response = client.completions.create(
            model=MODEL, prompt=prompt, max_tokens=12, temperature=0, extra_body={"ignore_eos": True}
        )
        return response.choices[0].text

    alone = [complete(p) for p in PROMPTS]
    with ThreadPoolExecutor(len(PROMPTS)) as pool:
        together = list(pool.map(complete, PROMPTS))
    assert together == alone


def test_seeded_sampling_does_not_depend_on_batch_neighbours(engine: InferenceEngine) -> None:
    params = SamplingParams(max_tokens=16, temperature=1.0, seed=123, ignore_eos=True)
    ids = engine.tokenizer("The quick brown fox")["input_ids"]
    alone = engine.generate(ids, params)[0].token_ids
    with ThreadPoolExecutor(4) as pool:
        runs = list(pool.map(lambda _: engine.generate(ids, params)[0].token_ids, range(4)))
    assert runs == [alone] * 4


def test_a_short_request_is_not_held_behind_a_long_one(engine: InferenceEngine) -> None:
    long_events: list[object] = []

    ids = engine.tokenizer("hello there")["input_ids"]
    long = engine.submit(ids, SamplingParams(max_tokens=300, temperature=0, ignore_eos=True), long_events.append)
    while not long_events:  # the long request is decoding before the short one arrives
        threading.Event().wait(0.001)
    short = engine.generate(ids, SamplingParams(max_tokens=3, temperature=0, ignore_eos=True))
    long_progress = len(long_events)
    assert short[0].finish_reason == "length"
    long.cancel()
    assert long_progress < 300, "the short request waited for the long one to finish"


def test_a_client_that_disconnects_mid_stream_frees_its_batch_rows(
    client: openai.OpenAI, engine: InferenceEngine
) -> None:
    stream = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "hi"}],
        max_tokens=2000,  # many seconds of decoding: only a cancellation ends it within the deadline
        stream=True,
        extra_body={"ignore_eos": True},
    )
    for _, _chunk in zip(range(3), stream, strict=False):
        pass
    assert engine.running_choices == 1
    stream.close()
    deadline = time.monotonic() + 1.5
    while engine.running_choices and time.monotonic() < deadline:
        time.sleep(0.02)
    assert engine.running_choices == 0


def test_a_consumer_that_raises_loses_only_its_own_request(engine: InferenceEngine) -> None:
    def broken_sink(event: object) -> None:
        raise RuntimeError("consumer went away")

    ids = engine.tokenizer("hello there")["input_ids"]
    params = SamplingParams(max_tokens=8, temperature=0, ignore_eos=True)
    engine.submit(ids, SamplingParams(max_tokens=2000, temperature=0, ignore_eos=True), broken_sink)
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda _: engine.generate(ids, params)[0], range(2)))
    assert [r.finish_reason for r in results] == ["length", "length"]
    deadline = time.monotonic() + 1.5
    while engine.running_choices and time.monotonic() < deadline:
        time.sleep(0.02)
    assert engine.running_choices == 0  # the broken request was cancelled, not decoded to 2000 tokens


def test_a_client_that_abandons_a_non_streamed_request_stops_its_generation_within_a_second(
    server_url: str, engine: InferenceEngine
) -> None:
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 2000,  # many seconds of decoding: only a cancellation ends it within the deadline
        "ignore_eos": True,
    }
    with pytest.raises(httpx.ReadTimeout):  # the client gives up while the answer is being generated
        httpx.post(f"{server_url}/v1/chat/completions", json=body, headers=AUTH, timeout=httpx.Timeout(10, read=1.0))
    deadline = time.monotonic() + 1.0
    while engine.running_choices and time.monotonic() < deadline:
        time.sleep(0.02)
    assert engine.running_choices == 0


def _burst(
    engine: InferenceEngine, prompts: list[list[int]], params: SamplingParams, on_first: Any = None
) -> list[list[TokenEvent]]:
    """Submit every prompt at once; each one's events, in order, once all have finished.

    `on_first`: called (on a thread of its own) when the first token of the burst comes out.
    """
    events: list[list[TokenEvent]] = [[] for _ in prompts]
    done = threading.Semaphore(0)
    first = threading.Event()

    def sink(i: int) -> Any:
        def put(event: object) -> None:
            assert isinstance(event, TokenEvent), event
            events[i].append(event)
            if on_first is not None and not first.is_set():
                first.set()
                threading.Thread(target=on_first).start()
            if event.finish_reason is not None:
                done.release()

        return put

    for i, ids in enumerate(prompts):
        engine.submit(ids, params, sink(i))
    for _ in prompts:
        assert done.acquire(timeout=60)
    return events


def test_prompts_prefilled_beside_the_decoding_batch_decode_as_when_prefilled_between_its_steps() -> None:
    model, tokenizer = load_policy(MODEL, device="cpu")
    prompts = [tokenizer(p * 3)["input_ids"] for p in PROMPTS] * 2  # repeats reuse a cached prefix
    results = {}
    for overlap in (True, False):
        with InferenceEngine(model, tokenizer, model_name=MODEL, overlap_prefill=overlap) as engine:
            params = SamplingParams(max_tokens=10, temperature=1.0, seed=7, ignore_eos=True)
            results[overlap] = _burst(engine, prompts, params)
    for ids, beside, between in zip(prompts, results[True], results[False], strict=True):
        assert [e.token_id for e in beside] == [e.token_id for e in between]
        logprobs = torch.tensor([e.logprob for e in beside])
        fresh = forward_logprobs(model, ids, [e.token_id for e in beside])
        torch.testing.assert_close(logprobs, fresh, atol=2e-4, rtol=0)


def test_prompts_prefilled_around_a_weight_update_carry_the_version_of_the_weights_that_prefilled_them() -> None:
    model, tokenizer = load_policy(MODEL, device="cpu")
    weights = {0: {k: v.clone() for k, v in model.state_dict().items()}}  # by policy version
    # 15 long prompts: the first one's first token comes out while the others queue for the prefill thread.
    prompts = [tokenizer(f"{p} {i} " * 60)["input_ids"] for i in range(3) for p in PROMPTS]
    params = SamplingParams(max_tokens=3, temperature=0, ignore_eos=True)
    reference, _ = load_policy(MODEL, device="cpu")
    with InferenceEngine(model, tokenizer, model_name=MODEL) as engine:
        for attempt in range(1, 16):  # where the update lands is up to the scheduler; it is checked wherever
            generator = torch.Generator().manual_seed(attempt)
            new = {k: v + 0.05 * torch.randn(v.shape, generator=generator) for k, v in weights[0].items()}
            weights[attempt] = new
            events = _burst(engine, prompts, params, on_first=lambda new=new: engine.update_weights(new))
            for ids, tokens in zip(prompts, events, strict=True):
                reference.load_state_dict(weights[tokens[0].policy_version])
                fresh = forward_logprobs(reference, ids, [tokens[0].token_id])
                torch.testing.assert_close(torch.tensor([tokens[0].logprob]), fresh, atol=2e-4, rtol=0)
            if len({e[0].policy_version for e in events}) == 2:
                break  # prefills ran on both sides of the update
        else:
            pytest.fail("in 15 bursts the weight update never landed between two of the burst's prefills")
        assert engine.version == attempt
