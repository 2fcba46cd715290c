"""Several policies on vLLM: one LoRA adapter per policy at launch, and one adapter replaced at a time."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file

from alight.client import AlightClient
from alight_server.config import GatewayConfig, ServerConfig
from alight_server.inference.adapters import AdapterSpec, adapter_tensors, wrap_with_adapters
from alight_server.inference.models import load_policy, resolve_model
from alight_server.inference.vllm_policy import policy_launch
from alight_server.inference.vllm_server import VllmLaunch
from alight_server.inference.vllm_weights import VllmWeightError, VllmWeights
from alight_server.policies.routing import GatewayRouting, RoutingRule
from alight_server.stacks.server_thread import free_port
from alight_server.trainer.run.weight_sync import WeightSync
from tests.conftest import LiveServer
from tests.server.inference.vllm_double import VllmDouble

SPEC = AdapterSpec(r=4, alpha=8.0, target_modules=("q_proj", "v_proj"))
POLICIES: dict[str, AdapterSpec | None] = {"planner": SPEC, "executor": SPEC, "judge": None}


@pytest.fixture(scope="module")
def launched(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    weights_dir = tmp_path_factory.mktemp("vllm-weights")
    return weights_dir, policy_launch(weights_dir, resolve_model("tiny"), POLICIES)


def test_each_lora_policy_is_a_lora_module_and_a_frozen_one_a_name_of_the_base(
    launched: tuple[Path, dict[str, Any]],
) -> None:
    weights_dir, settings = launched
    launch = VllmLaunch(
        model_dir=Path("/models/tiny"), served_name="tiny", port=free_port(), python=sys.executable, **settings
    )
    cmd = launch.command()
    assert cmd[cmd.index("--served-model-name") + 1 : cmd.index("--served-model-name") + 3] == ["tiny", "judge"]
    assert cmd[cmd.index("--enable-lora") :][:5] == ["--enable-lora", "--max-loras", "2", "--max-lora-rank", "8"]
    modules = cmd[cmd.index("--lora-modules") + 1 :][:2]
    assert modules == [
        f"planner={weights_dir / 'initial' / 'planner'}",
        f"executor={weights_dir / 'initial' / 'executor'}",
    ]
    assert launch.env({})["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] == "True"


def test_the_initial_adapter_is_a_peft_folder_of_zeros_named_as_the_engine_names_it(
    launched: tuple[Path, dict[str, Any]],
) -> None:
    weights_dir, _ = launched
    folder = weights_dir / "initial" / "planner"
    assert sorted(p.name for p in folder.iterdir()) == ["adapter_config.json", "adapter_model.safetensors"]
    tensors = load_file(str(folder / "adapter_model.safetensors"))
    model, _ = load_policy("tiny", device="cpu")
    live = adapter_tensors(wrap_with_adapters(model, {"planner": SPEC})[0], "planner")
    assert {k: tuple(v.shape) for k, v in tensors.items()} == {k: tuple(v.shape) for k, v in live.items()}
    assert all(not t.any() for t in tensors.values())


def test_one_policys_adapter_is_replaced_in_place_under_its_own_name(
    double: VllmDouble, vllm_url: str, tmp_path: Path
) -> None:
    weights = VllmWeights(vllm_url, tmp_path, adapter_specs={"planner": SPEC, "executor": SPEC}, base_model="tiny")
    tensors = {"base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight": torch.full((64, 4), 0.5)}
    weights.load_adapter("executor", lambda: tensors, 3)
    assert double.calls == ["/pause?mode=wait", "/v1/load_lora_adapter:inplace=True", "/reset_prefix_cache",
                            "/update_weight_version", "/resume"]  # fmt: skip
    assert list(double.adapters) == ["executor"] and double.weight_version == "3"
    written = load_file(str(Path(double.adapters["executor"]) / "adapter_model.safetensors"))
    assert torch.equal(written[next(iter(tensors))], next(iter(tensors.values())))
    assert double.adapter_files == ["adapter_config.json", "adapter_model.safetensors"]


def test_an_adapter_vllm_does_not_serve_is_refused_before_vllm_pauses(
    double: VllmDouble, vllm_url: str, tmp_path: Path
) -> None:
    weights = VllmWeights(vllm_url, tmp_path, adapter_specs={"planner": SPEC}, base_model="tiny")
    with pytest.raises(VllmWeightError, match="serves no LoRA adapter 'critic'"):
        weights.load_adapter("critic", dict, 1)
    assert double.calls == []


def test_a_failed_adapter_load_still_resumes_vllm(double: VllmDouble, vllm_url: str, tmp_path: Path) -> None:
    double.fail["/v1/load_lora_adapter:inplace=True"] = 500
    weights = VllmWeights(vllm_url, tmp_path, adapter_specs={"planner": SPEC}, base_model="tiny")
    with pytest.raises(VllmWeightError, match="could not load LoRA adapter 'planner'"):
        weights.load_adapter("planner", dict, 1)
    assert double.calls[-1] == "/resume" and not double.paused and double.weight_version == "default"


@pytest.fixture
def server_config(server_config: ServerConfig) -> ServerConfig:
    """A gateway routing the two LoRA policies (by harness role), so a push can name one."""
    rules = [RoutingRule(role=name, policy=name) for name in ("planner", "executor")]
    routing = GatewayRouting(policies=["planner", "executor"], rules=rules)
    return server_config.model_copy(update={"gateway": GatewayConfig(routing=routing)})


def test_the_weight_sync_replaces_only_the_pushed_policys_adapter_on_vllm(
    live_server: LiveServer, double: VllmDouble, vllm_url: str, tmp_path: Path
) -> None:
    weights = VllmWeights(vllm_url, tmp_path, adapter_specs={"planner": SPEC, "executor": SPEC}, base_model="tiny")
    tensors = {"base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight": torch.ones(64, 4)}
    with AlightClient(live_server.url, live_server.admin_key) as client:
        version, _ = WeightSync(client, target=weights).push(lambda: tensors, {"step": 1}, policy="planner")
        history = client.policy().versions
    assert list(double.adapters) == ["planner"] and double.weight_version == str(version) == "1"
    assert history[-1].metadata["policies"] == ["planner"]
