"""`policies:` and `routing:` in a training config: read, filled in from the top level, refused with what to fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from alight_server.trainer.config.run import ConfigError, load_config

BASE = """\
model: tiny
dataset: {train: tasks.jsonl}
agent: {entrypoint: agent.py:main}
lora: {enabled: true, r: 8}
optimizer: {lr: 1.0e-5}
"""

TWO = (
    BASE
    + """\
policies:
  planner: {}
  executor: {trainable: false, optimizer: {lr: 1.0e-4}, lora: {r: 4}}
routing:
  rules:
    - {agent: planner, policy: planner}
    - {model: "*exec*", policy: executor}
  default: executor
"""
)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return path


def problem(tmp_path: Path, text: str) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, text))
    return str(info.value)


def test_a_config_without_policies_has_no_gateway_routing(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, BASE))
    assert config.policies == {} and config.routing is None
    assert config.gateway_routing() is None
    assert config.resolved_policies() == []


def test_a_policy_overrides_only_the_keys_it_sets(tmp_path: Path) -> None:
    planner, executor = load_config(write(tmp_path, TWO)).resolved_policies()
    assert (planner.name, planner.trainable, planner.optimizer.lr, planner.lora.r) == ("planner", True, 1e-5, 8)
    assert (executor.name, executor.trainable, executor.optimizer.lr) == ("executor", False, 1e-4)
    assert executor.lora.r == 4 and executor.lora.enabled  # enabled comes from the top level
    assert executor.model == "tiny"


def test_the_gateway_gets_the_policy_names_rules_and_default(tmp_path: Path) -> None:
    routing = load_config(write(tmp_path, TWO)).gateway_routing()
    assert routing is not None
    assert routing.policies == ["planner", "executor"]
    assert [rule.model_dump(exclude_none=True) for rule in routing.rules] == [
        {"agent": "planner", "policy": "planner"},
        {"model": "*exec*", "policy": "executor"},
    ]
    assert routing.default == "executor"


def test_one_policy_without_routing_serves_every_call(tmp_path: Path) -> None:
    routing = load_config(write(tmp_path, BASE + "policies: {solo: {}}\n")).gateway_routing()
    assert routing is not None and routing.default == "solo" and routing.rules == []


def test_routing_without_policies_is_refused(tmp_path: Path) -> None:
    assert "policies: is not set" in problem(tmp_path, BASE + "routing: {default: a}\n")


def test_two_policies_without_routing_are_refused_with_an_example_rule(tmp_path: Path) -> None:
    message = problem(tmp_path, BASE + "policies: {a: {}, b: {}}\n")
    assert "routing: is not set" in message and "{agent: planner, policy: a}" in message


def test_a_rule_naming_an_unknown_policy_is_refused(tmp_path: Path) -> None:
    message = problem(tmp_path, BASE + "policies: {a: {}}\nrouting: {rules: [{model: m, policy: z}]}\n")
    assert "routing.rules[0] sends calls to policy 'z', which policies: lacks (a)" in message


def test_an_unknown_default_is_refused(tmp_path: Path) -> None:
    assert "routing.default is 'z'" in problem(tmp_path, BASE + "policies: {a: {}}\nrouting: {default: z}\n")


def test_a_rule_needs_exactly_one_condition(tmp_path: Path) -> None:
    none = problem(tmp_path, BASE + "policies: {a: {}}\nrouting: {rules: [{policy: a}]}\n")
    two = problem(tmp_path, BASE + "policies: {a: {}}\nrouting: {rules: [{policy: a, agent: x, role: y}]}\n")
    assert "routing.rules.0" in none and "exactly one of agent, model or role (got none)" in none
    assert "(got agent, role)" in two


def test_a_policy_name_that_cannot_be_a_model_name_is_refused(tmp_path: Path) -> None:
    assert "policy name 'a b' must be" in problem(tmp_path, BASE + "policies: {'a b': {}}\n")


def test_all_frozen_policies_are_refused(tmp_path: Path) -> None:
    message = problem(tmp_path, BASE + "policies: {a: {trainable: false}}\n")
    assert "at least one must train" in message


def test_another_base_model_is_refused_as_not_built(tmp_path: Path) -> None:
    message = problem(tmp_path, BASE + "policies: {a: {model: smollm2-135m}}\n")
    assert "policies.a.model is 'smollm2-135m'" in message and "not built" in message


def test_a_trainable_policy_among_several_needs_lora(tmp_path: Path) -> None:
    text = BASE + "policies: {a: {lora: {enabled: false}}, b: {}}\nrouting: {default: b}\n"
    assert "policies.a trains without LoRA" in problem(tmp_path, text)


def test_a_frozen_policy_may_be_the_base_model_without_lora(tmp_path: Path) -> None:
    text = BASE + "policies: {a: {lora: {enabled: false}, trainable: false}, b: {}}\nrouting: {default: b}\n"
    assert [p.lora.enabled for p in load_config(write(tmp_path, text)).resolved_policies()] == [False, True]


def test_a_typo_inside_a_policy_is_named_with_its_path(tmp_path: Path) -> None:
    assert "policies.a.trainble: unknown key" in problem(tmp_path, BASE + "policies: {a: {trainble: false}}\n")


def test_a_policy_names_the_reward_that_scores_it(tmp_path: Path) -> None:
    text = BASE + "policies: {a: {reward: a_score}, b: {}}\nrouting: {default: b}\n"
    a, b = load_config(write(tmp_path, text)).resolved_policies()
    assert (a.reward, b.reward) == ("a_score", None)


def test_an_empty_reward_name_is_refused(tmp_path: Path) -> None:
    assert "policies.a.reward" in problem(tmp_path, BASE + "policies: {a: {reward: ''}}\n")


def test_init_from_is_read_relative_to_the_config_folder(tmp_path: Path) -> None:
    (tmp_path / "earlier" / "checkpoints").mkdir(parents=True)
    config = load_config(write(tmp_path, BASE + "policies: {a: {init_from: earlier/checkpoints}}\n"))
    assert config.policies["a"].init_from == str(tmp_path / "earlier" / "checkpoints")
    assert config.resolved_policies()[0].init_from == str(tmp_path / "earlier" / "checkpoints")


def test_init_from_a_missing_folder_is_refused_with_the_policy_named(tmp_path: Path) -> None:
    message = problem(tmp_path, BASE + "policies: {a: {init_from: nowhere}}\n")
    assert f"policies.a.init_from is {str(tmp_path / 'nowhere')!r}, which is not a folder" in message


def test_the_verl_backend_with_policies_is_refused_in_one_sentence(tmp_path: Path) -> None:
    message = problem(tmp_path, BASE + "trainer: {backend: verl}\npolicies: {a: {}}\n")
    assert "trainer.backend: verl trains one policy" in message
    assert "an actor adapter per policy and a rollout LoRA slot per policy" in message


def test_the_verl_backend_without_policies_is_still_read(tmp_path: Path) -> None:
    assert load_config(write(tmp_path, BASE + "trainer: {backend: verl}\n")).trainer.backend == "verl"
