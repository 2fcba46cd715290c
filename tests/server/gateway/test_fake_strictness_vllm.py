"""The vLLM-shaped test double refuses the same malformed requests as a real vLLM, with the same status.

Sent straight to each (not through the gateway, whose own checks would hide the upstream's answer).
Run against a vLLM serving a small model (docs/gateway.md says how to start one on CPU):
    ALIGHT_TEST_VLLM_URL=http://127.0.0.1:8877/v1 .venv/bin/pytest -m vllm tests/server/gateway/test_fake_strictness_vllm.py
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from alight_server.stacks.server_thread import ServerThread
from alight_testing import create_fake_upstream

VLLM_URL = os.environ.get("ALIGHT_TEST_VLLM_URL")
pytestmark = [
    pytest.mark.vllm,
    pytest.mark.skipif(not VLLM_URL, reason="set ALIGHT_TEST_VLLM_URL to a vLLM server's /v1 URL"),
]
USER = [{"role": "user", "content": "hi"}]


def _chat(**fields: Any) -> tuple[str, dict[str, Any]]:
    return "/chat/completions", {"messages": USER, "max_tokens": 2, **fields}


def _completion(**fields: Any) -> tuple[str, dict[str, Any]]:
    return "/completions", {"prompt": [1, 2, 3], "max_tokens": 2, **fields}


# (case, (path, body without model unless the case is about it)); the table in docs/gateway.md lists each.
CASES = {
    "valid chat": _chat(),
    "valid completion on token ids": _completion(),
    "max_tokens -1": _chat(max_tokens=-1),
    "max_tokens 0": _chat(max_tokens=0),
    "max_tokens 1.5": _chat(max_tokens=1.5),
    'max_tokens "5" (a numeric string)': _chat(max_tokens="5"),
    "max_completion_tokens -1": _chat(max_completion_tokens=-1),
    "n 0": _chat(n=0),
    "model 5 (not a string)": _chat(model=5),
    "seed 2^70": _chat(seed=2**70),
    "seed -2^63": _chat(seed=-(2**63)),
    "content null in a user turn": ("/chat/completions", {"messages": [{"role": "user", "content": None}]}),
    "message without role": ("/chat/completions", {"messages": [{"content": "hi"}]}),
    "role 5": ("/chat/completions", {"messages": [{"role": 5, "content": "hi"}]}),
    "messages []": ("/chat/completions", {"messages": []}),
    'tools "x"': _chat(tools="x"),
    "stop 5": _chat(stop=5),
    "prompt id 10^9 (out of vocabulary)": _completion(prompt=[1, 10**9]),
    "prompt id -1": _completion(prompt=[1, -1]),
    "temperature -1": _chat(temperature=-1),
    "top_logprobs 50": _chat(logprobs=True, top_logprobs=50),
    "unknown model": _chat(model="no-such-model"),
}


@pytest.fixture(scope="module")
def both() -> Iterator[tuple[str, str, str]]:
    """(vLLM URL, fake URL, model name): the fake serves vLLM's model name."""
    assert VLLM_URL is not None
    vllm = VLLM_URL.rstrip("/")
    model = httpx.get(f"{vllm}/models", timeout=30).json()["data"][0]["id"]
    with ServerThread(create_fake_upstream(model=model)) as fake:
        yield vllm, f"{fake}/v1", model


@pytest.mark.parametrize("case", list(CASES))
def test_the_fake_answers_a_request_with_the_status_vllm_does(both: tuple[str, str, str], case: str) -> None:
    vllm, fake, model = both
    path, body = CASES[case]
    body = {"model": model, **body}
    real = httpx.post(vllm + path, json=body, timeout=120)
    double = httpx.post(fake + path, json=body, timeout=30)
    print(f"| {case} | {real.status_code} | {double.status_code} |")
    assert double.status_code == real.status_code, (real.text[:300], double.text[:300])
