"""Dynamic batching: concurrent requests share decode steps without changing what each one gets."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import openai
import pytest
from inference_testkit import MODEL

from alight_server.inference.engine import InferenceEngine
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
        httpx.post(f"{server_url}/v1/chat/completions", json=body, timeout=httpx.Timeout(10, read=1.0))
    deadline = time.monotonic() + 1.0
    while engine.running_choices and time.monotonic() < deadline:
        time.sleep(0.02)
    assert engine.running_choices == 0
