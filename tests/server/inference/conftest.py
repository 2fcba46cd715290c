"""Fixtures for the embedded inference backend: one tiny-model engine served on loopback, real openai clients."""

from __future__ import annotations

from collections.abc import Iterator

import openai
import pytest
from inference_testkit import ADMIN_KEY, API_KEY, MODEL

from alight_server.inference.engine import InferenceEngine
from alight_server.inference.server import create_inference_app
from alight_server.stacks.server_thread import ServerThread
from tests.server.inference.vllm_double import VllmDouble


@pytest.fixture(scope="session")
def engine() -> Iterator[InferenceEngine]:
    """Shared by read-only tests: nothing here may change its weights (weight tests build their own)."""
    with InferenceEngine.from_model_name(MODEL, device="cpu", max_batch_size=16, max_n=8) as eng:
        yield eng


@pytest.fixture(scope="session")
def server_url(engine: InferenceEngine) -> Iterator[str]:
    with ServerThread(create_inference_app(engine, api_key=API_KEY, admin_key=ADMIN_KEY)) as url:
        yield url


@pytest.fixture
def client(server_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server_url}/v1", api_key=API_KEY, max_retries=0, timeout=60)


@pytest.fixture
def double() -> VllmDouble:
    """A stand-in for vLLM's HTTP API (the routes alight drives), recording what it was asked."""
    return VllmDouble()


@pytest.fixture
def vllm_url(double: VllmDouble) -> Iterator[str]:
    with ServerThread(double.app()) as url:
        yield url
