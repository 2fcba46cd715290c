"""The embedded stack with several policies: its gateway routes them; the engine or vLLM it starts serves each by name."""

from __future__ import annotations

from pathlib import Path

from alight_server.inference.engine import InferenceEngine
from alight_server.policies.routing import GatewayRouting
from alight_server.stacks.kinds import EmbeddedStack
from alight_server.stacks.opening import vllm_policy
from alight_server.trainer.config.run import parse_config
from alight_testing.tiny_run import tiny_run_config

ROUTING = GatewayRouting(policies=["planner", "executor"], default="planner")


def test_the_embedded_stack_routes_several_policies_through_its_gateway(tmp_path: Path) -> None:
    engine = InferenceEngine.from_model_name("tiny", device="cpu", max_batch_size=1)
    assert EmbeddedStack(engine, tmp_path, routing=ROUTING).server_config.gateway.routing == ROUTING


def test_the_vllm_of_a_run_serves_each_lora_policy_as_an_adapter_and_a_frozen_one_as_the_base(
    tmp_path: Path,
) -> None:
    raw = tiny_run_config(
        tmp_path, "agent.py:main", [{"word": "apple"}], lora={"enabled": True, "r": 4}, inference={"backend": "vllm"},
        policies={"planner": {}, "executor": {"lora": {"r": 8}}, "judge": {"trainable": False, "lora": {"enabled": False}}},
        routing={"default": "planner"},
    )  # fmt: skip
    vllm = vllm_policy(parse_config(raw, tmp_path), tmp_path / "run")
    command = vllm.server.launch.command()
    served = command[command.index("--served-model-name") + 1 : command.index("--host")]
    assert served == ["tiny", "judge"]
    modules = command[command.index("--lora-modules") + 1 :]
    assert [m.split("=")[0] for m in modules[:2]] == ["planner", "executor"]
    assert command[command.index("--max-loras") + 1] == "2" and command[command.index("--max-lora-rank") + 1] == "8"
    assert set(vllm.adapter_specs) == {"planner", "executor"}
    # each adapter folder is a zero adapter in peft's layout, named as the trainer's adapter_weights names tensors
    folder = Path(modules[0].split("=", 1)[1])
    assert (folder / "adapter_config.json").is_file() and (folder / "adapter_model.safetensors").is_file()


def test_the_embedded_stack_without_policies_leaves_the_gateway_unrouted(tmp_path: Path) -> None:
    engine = InferenceEngine.from_model_name("tiny", device="cpu", max_batch_size=1)
    assert EmbeddedStack(engine, tmp_path).server_config.gateway.routing is None
