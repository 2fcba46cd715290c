"""Weight reloads: in place, between decode steps, bumping the policy version, without a restart."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import torch
from inference_testkit import ADMIN_AUTH, ADMIN_KEY, API_KEY, MODEL, forward_logprobs, overfit, render

from alight_server.inference.engine import InferenceEngine
from alight_server.inference.models import load_policy
from alight_server.inference.server import create_inference_app
from alight_server.stacks.server_thread import ServerThread

TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather in a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
]
ASK: list[Any] = [{"role": "user", "content": "What is the weather in Paris?"}]
CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'


@pytest.fixture(scope="module")
def own_engine() -> Iterator[InferenceEngine]:
    """An engine of its own: these tests change weights, which the shared engine must never see."""
    with InferenceEngine.from_model_name(MODEL, device="cpu") as eng:
        yield eng


@pytest.fixture(scope="module")
def own_url(own_engine: InferenceEngine) -> Iterator[str]:
    with ServerThread(create_inference_app(own_engine, api_key=API_KEY, admin_key=ADMIN_KEY)) as url:
        yield url


@pytest.fixture
def own_client(own_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{own_url}/v1", api_key=API_KEY, max_retries=0)


def _greedy(client: openai.OpenAI) -> tuple[str, str]:
    raw = client.chat.completions.with_raw_response.create(model=MODEL, messages=ASK, max_tokens=12, temperature=0)
    return raw.parse().choices[0].message.content or "", raw.headers["x-alight-policy-version"]


def _perturbed(engine: InferenceEngine, scale: float = 0.05) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return {k: v + scale * torch.randn(v.shape, generator=generator) for k, v in engine.model.state_dict().items()}


def test_in_process_update_changes_outputs_and_bumps_the_version(own_engine: InferenceEngine, own_client) -> None:
    before, version = _greedy(own_client)
    new_version = own_engine.update_weights(_perturbed(own_engine))
    after, served_version = _greedy(own_client)
    assert new_version == int(version) + 1 and served_version == str(new_version)
    assert after != before


def test_admin_route_loads_a_saved_checkpoint_and_logprobs_follow_it(
    own_engine: InferenceEngine, own_client: openai.OpenAI, own_url: str, tmp_path: Path
) -> None:
    model, _ = load_policy(MODEL, device="cpu")
    model.load_state_dict(_perturbed(own_engine, 0.1))
    model.save_pretrained(tmp_path)
    response = httpx.post(f"{own_url}/admin/weights", json={"path": str(tmp_path)}, headers=ADMIN_AUTH)
    assert response.status_code == 200
    assert response.json()["policy_version"] == own_engine.version
    served = own_client.chat.completions.create(
        model=MODEL, messages=ASK, max_tokens=8, logprobs=True, seed=1, extra_body={"return_token_ids": True}
    )
    ids = served.choices[0].model_extra["token_ids"]  # pyright: ignore[reportOptionalSubscript]
    expected = forward_logprobs(model, render(own_engine.tokenizer, ASK), ids)  # the checkpoint, not the old weights
    got = torch.tensor([e.logprob for e in served.choices[0].logprobs.content])  # pyright: ignore[reportOptionalIterable,reportOptionalMemberAccess]
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize(
    ("body", "message"),
    [({"path": "/nonexistent/ckpt"}, "neither a .safetensors file"), ({}, "path")],
)
def test_admin_route_rejects_unusable_weights_without_changing_the_version(
    own_engine: InferenceEngine, own_url: str, body: dict[str, str], message: str
) -> None:
    version = own_engine.version
    response = httpx.post(f"{own_url}/admin/weights", json=body, headers=ADMIN_AUTH)
    assert response.status_code == 400 and message in response.json()["error"]["message"]
    assert own_engine.version == version


def test_in_process_update_with_wrong_shapes_is_refused(own_engine: InferenceEngine) -> None:
    name = next(iter(own_engine.model.state_dict()))
    with pytest.raises(ValueError, match=f"tensor '{name}' has shape"):
        own_engine.update_weights({name: torch.zeros(3, 3)})
    with pytest.raises(ValueError, match="match no parameter"):
        own_engine.update_weights({"not.a.parameter": torch.zeros(1)})


def test_a_model_trained_to_call_a_tool_returns_openai_tool_calls(
    own_engine: InferenceEngine, own_client: openai.OpenAI
) -> None:
    tokenizer = own_engine.tokenizer
    model, _ = load_policy(MODEL, device="cpu")
    target = tokenizer(CALL, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    own_engine.update_weights(overfit(model, render(tokenizer, ASK, TOOLS), target))

    response = own_client.chat.completions.create(model=MODEL, messages=ASK, tools=TOOLS, max_tokens=40, temperature=0)  # type: ignore[arg-type]
    choice = response.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.tool_calls and choice.message.tool_calls[0].function.name == "get_weather"  # pyright: ignore[reportAttributeAccessIssue]
    assert choice.message.tool_calls[0].function.arguments == '{"city": "Paris"}'  # pyright: ignore[reportAttributeAccessIssue]

    chunks = list(
        own_client.chat.completions.create(
            model=MODEL,
            messages=ASK,
            tools=TOOLS,
            max_tokens=40,
            temperature=0,
            stream=True,  # type: ignore[arg-type]
        )
    )
    calls = [tc for c in chunks if c.choices for tc in c.choices[0].delta.tool_calls or []]
    assert [(tc.function.name, tc.function.arguments) for tc in calls] == [("get_weather", '{"city": "Paris"}')]  # pyright: ignore[reportOptionalMemberAccess]
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
