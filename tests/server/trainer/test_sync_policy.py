"""Weight sync per policy: one policy's adapter is loaded while the other policy's calls run on.

A real gateway (routing two policies) in front of the real inference server, whose engine serves both
policies as LoRA adapters of the tiny model; the sync loads through the engine, /admin/weights, or a target.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch

from alight.client import AlightClient, ApiError
from alight.schemas import Mode, RolloutCreate, UpstreamCreate
from alight.semconv import HEADER_ROLE
from alight_server.config import GatewayConfig, ServerConfig
from alight_server.http.auth import issue_attempt_token
from alight_server.inference.adapters import AdapterSpec
from alight_server.inference.engine import InferenceEngine
from alight_server.inference.models import load_policy
from alight_server.inference.server import create_inference_app
from alight_server.policies.routing import GatewayRouting, RoutingRule
from alight_server.stacks.kinds import KEY_DIR
from alight_server.stacks.server_thread import ServerThread
from alight_server.trainer.run.weight_sync import WeightSync

SPEC = AdapterSpec(r=4, alpha=8.0, target_modules=("q_proj", "v_proj"))
POLICIES = ("planner", "executor")
ROUTING = GatewayRouting(policies=list(POLICIES), rules=[RoutingRule(role=name, policy=name) for name in POLICIES])
API_KEY, ADMIN_KEY = "sync-policy-api-key", "sync-policy-admin-key"


def adapter_tensors(seed: int) -> dict[str, torch.Tensor]:
    """A trained adapter as the trainer hands it over (peft's one-adapter state dict names), B non-zero."""
    from peft import LoraConfig, get_peft_model, get_peft_model_state_dict

    model, _ = load_policy("tiny", device="cpu")
    config = LoraConfig(r=SPEC.r, lora_alpha=int(SPEC.alpha), target_modules=list(SPEC.target_modules))
    state = get_peft_model_state_dict(get_peft_model(model, config))
    generator = torch.Generator().manual_seed(seed)
    return {k: 0.3 * torch.randn(v.shape, generator=generator) for k, v in state.items()}


@pytest.fixture(scope="module")
def trained() -> dict[str, torch.Tensor]:
    return adapter_tensors(1)


@dataclass
class Stack:
    client: AlightClient
    engine: InferenceEngine
    inference_url: str
    base_url: str  # the attempt's OPENAI_BASE_URL
    token: str

    def chat(self, policy: str) -> httpx.Response:
        body = {"model": "any", "messages": [{"role": "user", "content": "plan it"}], "max_tokens": 6}
        headers = {"authorization": f"Bearer {self.token}", HEADER_ROLE: policy}
        return httpx.post(f"{self.base_url}/chat/completions", json=body, headers=headers, timeout=60)

    def answer(self, policy: str) -> str:
        reply = self.chat(policy)
        assert reply.status_code == 200, reply.text
        return reply.json()["choices"][0]["message"]["content"]


@pytest.fixture
def routing() -> GatewayRouting | None:
    return ROUTING


@pytest.fixture
def server_config(server_config: ServerConfig, routing: GatewayRouting | None, tmp_path: Path) -> ServerConfig:
    """Routing two policies; the engine's key read from a file under upstream_key_dir, as the embedded stack does."""
    return server_config.model_copy(
        update={"gateway": GatewayConfig(routing=routing), "upstream_key_dir": tmp_path / KEY_DIR}
    )


@pytest.fixture
def stack(live_server: Any, tmp_path: Path) -> Iterator[Stack]:
    model, tokenizer = load_policy("tiny", device="cpu")
    engine = InferenceEngine(model, tokenizer, adapters=dict.fromkeys(POLICIES, SPEC), max_batch_size=8)
    app = create_inference_app(engine, API_KEY, ADMIN_KEY)
    with ServerThread(app) as url:
        store = live_server.store
        key_file = tmp_path / KEY_DIR / "engine.key"
        key_file.parent.mkdir(exist_ok=True)
        key_file.write_text(API_KEY)
        store.add_upstream(UpstreamCreate(id="engine", url=url + "/v1", api_key_file=str(key_file)))
        (rollout,) = store.create_rollouts([RolloutCreate(task={"i": 0}, mode=Mode.VAL)])  # greedy
        ((claimed, attempt),) = store.claim_attempts(limit=1, ids=[rollout.id])
        token = issue_attempt_token(live_server.app.state.token_secret, claimed.id, attempt, ttl_s=3600)
        base_url = f"{live_server.url}/gw/{claimed.id}/{attempt}/v1"
        with AlightClient(live_server.url, admin_key=live_server.admin_key) as client:
            yield Stack(client, engine, url, base_url, token)


def test_a_policy_push_into_the_engine_changes_only_that_adapter_and_its_own_version(
    stack: Stack, trained: dict[str, torch.Tensor]
) -> None:
    executor_before, planner_before = stack.answer("executor"), stack.answer("planner")
    version, seconds = WeightSync(stack.client, engine=stack.engine).push(trained, {"step": 1}, policy="planner")
    assert version == 1 and seconds >= 0
    assert stack.engine.adapter_versions == {"planner": 1, "executor": 0}
    assert stack.client.policy().versions[-1].metadata == {"step": 1, "policies": ["planner"]}
    assert stack.client.gateway_status()["own_versions"] == {"planner": 1, "executor": 0}
    assert stack.answer("executor") == executor_before  # greedy: the executor's adapter did not move
    assert stack.answer("planner") != planner_before


def test_a_policy_push_through_admin_weights_sends_the_adapter_by_name(
    stack: Stack, trained: dict[str, torch.Tensor]
) -> None:
    sync = WeightSync(stack.client, inference_url=stack.inference_url, inference_key=ADMIN_KEY)
    version, _ = sync.push(lambda: trained, policy="executor")
    assert version == 1 and stack.engine.adapter_versions == {"planner": 0, "executor": 1}


@dataclass
class WatchingTarget:
    """A weight target that loads adapters into the engine and, mid-load, calls the gateway as both policies."""

    stack: Stack
    seen: dict[str, int]

    def load(self, weights: Callable[[], Mapping[str, torch.Tensor]], version: int) -> None:
        raise AssertionError("a policy push loads the adapter, never the whole model")

    def load_adapter(self, name: str, tensors: Callable[[], Mapping[str, torch.Tensor]], version: int) -> None:
        self.seen.update({policy: self.stack.chat(policy).status_code for policy in POLICIES})
        self.seen["version"] = version
        self.stack.engine.update_adapter(name, tensors())


def test_while_one_policy_loads_the_others_calls_answer_and_its_own_wait(
    stack: Stack, trained: dict[str, torch.Tensor]
) -> None:
    target = WatchingTarget(stack, {})
    version, _ = WeightSync(stack.client, target=target).push(lambda: trained, policy="planner")
    assert target.seen == {"planner": 429, "executor": 200, "version": 1} and version == 1
    assert stack.chat("planner").status_code == 200


class WholeModelTarget:
    def load(self, weights: Callable[[], Mapping[str, torch.Tensor]], version: int) -> None:
        raise AssertionError("never called")


def test_a_whole_model_target_refuses_a_policy_push_and_the_policy_reopens_on_the_old_version(
    stack: Stack, trained: dict[str, torch.Tensor]
) -> None:
    with pytest.raises(ValueError, match="loads whole models only; it cannot update policy 'planner'"):
        WeightSync(stack.client, target=WholeModelTarget()).push(trained, policy="planner")
    status = stack.client.gateway_status()
    assert status["paused_policies"] == [] and status["policy_version"] == 0
    assert stack.chat("planner").status_code == 200


@pytest.mark.parametrize("routing", [None])
def test_a_policy_push_to_a_single_policy_gateway_is_refused_before_anything_loads(
    stack: Stack, trained: dict[str, torch.Tensor]
) -> None:
    with pytest.raises(ApiError, match="routing is off"):
        WeightSync(stack.client, engine=stack.engine).push(trained, policy="planner")
    assert stack.engine.adapter_versions == {"planner": 0, "executor": 0}
