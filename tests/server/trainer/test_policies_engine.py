"""A step of one policy, loaded into the engine as its adapter, leaves the other policy's served outputs unchanged."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from policies_fixtures import TWO, digest, greedy, step

from alight_server.inference.adapters import adapter_tensors
from alight_server.inference.engine import InferenceEngine
from alight_server.trainer.backends.policy_set import PolicySet, make_policy_set
from alight_server.trainer.config.run import TrainConfig
from alight_server.trainer.run.policy_engine import engine_adapters, policy_engine


@pytest.fixture
def served(tiny_config: Callable[..., TrainConfig]) -> Iterator[tuple[InferenceEngine, PolicySet]]:
    config = tiny_config(**TWO)
    with policy_engine(config.model, config.inference, engine_adapters(config)) as engine:
        yield engine, make_policy_set(config)


def test_an_update_of_one_policy_leaves_the_others_served_weights_and_greedy_outputs_unchanged_and_the_reverse(
    served: tuple[InferenceEngine, PolicySet],
) -> None:
    engine, policies = served
    for trained, other in (("planner", "executor"), ("executor", "planner")):
        before = {name: greedy(engine, name) for name in ("planner", "executor")}
        served_other = digest(adapter_tensors(engine.model, other))
        step(policies, trained)
        engine.update_adapter(trained, policies.weights(trained))
        assert digest(adapter_tensors(engine.model, other)) == served_other
        assert greedy(engine, other) == before[other]
        # the trained one serves the trainer's adapter, and its logprobs moved
        assert digest(adapter_tensors(engine.model, trained)) == digest(policies.weights(trained))
        after = greedy(engine, trained)
        assert after != before[trained]
    assert engine.adapter_versions == {"planner": 1, "executor": 1}
