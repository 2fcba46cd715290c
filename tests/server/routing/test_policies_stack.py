"""The embedded stack with several policies: its gateway routes them; the vLLM it would start refuses them, naming them."""

from __future__ import annotations

from pathlib import Path

import pytest

from alight_server.inference.engine import InferenceEngine
from alight_server.inference.vllm_policy import VllmPolicy
from alight_server.inference.vllm_server import VllmLaunch, VllmServer
from alight_server.routing import GatewayRouting
from alight_server.stack import EmbeddedStack

ROUTING = GatewayRouting(policies=["planner", "executor"], default="planner")


def test_the_embedded_stack_routes_several_policies_through_its_gateway(tmp_path: Path) -> None:
    engine = InferenceEngine.from_model_name("tiny", device="cpu", max_batch_size=1)
    assert EmbeddedStack(engine, tmp_path, routing=ROUTING).server_config.gateway.routing == ROUTING


def test_the_vllm_stack_refuses_several_policies_naming_them(tmp_path: Path) -> None:
    server = VllmServer(VllmLaunch(model_dir=tmp_path, served_name="tiny", port=1), log_path=tmp_path / "vllm.log")
    vllm = VllmPolicy(server, "tiny", tmp_path / "weights")
    with pytest.raises(ValueError, match="policies: names planner, executor, but the vLLM this run starts"):
        EmbeddedStack(None, tmp_path, vllm=vllm, routing=ROUTING)
    assert not (tmp_path / "stack.json").exists()


def test_the_embedded_stack_without_policies_leaves_the_gateway_unrouted(tmp_path: Path) -> None:
    engine = InferenceEngine.from_model_name("tiny", device="cpu", max_batch_size=1)
    assert EmbeddedStack(engine, tmp_path).server_config.gateway.routing is None
