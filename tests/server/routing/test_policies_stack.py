"""A training run with several policies is refused up front where nothing serves an adapter per policy yet."""

from __future__ import annotations

from pathlib import Path

import pytest

from alight_server.inference.engine import InferenceEngine
from alight_server.routing import GatewayRouting
from alight_server.stack import EmbeddedStack


def test_the_embedded_stack_refuses_several_policies_naming_them(tmp_path: Path) -> None:
    routing = GatewayRouting(policies=["planner", "executor"], default="planner")
    engine = InferenceEngine.from_model_name("tiny", device="cpu", max_batch_size=1)
    with pytest.raises(ValueError, match="policies: names planner, executor, but the embedded engine"):
        EmbeddedStack(engine, tmp_path, routing=routing)
    assert not (tmp_path / "stack.json").exists()


def test_the_embedded_stack_without_policies_leaves_the_gateway_unrouted(tmp_path: Path) -> None:
    engine = InferenceEngine.from_model_name("tiny", device="cpu", max_batch_size=1)
    assert EmbeddedStack(engine, tmp_path).server_config.gateway.routing is None
