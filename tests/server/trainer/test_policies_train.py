"""`alight train` with two policies on the tiny model, end to end: a two-role agent, each role its own LoRA adapter.

Both policies trained one step (a run the other tests share); that run resumed (both adapters, optimizers and
the engine's served adapters restored); the planner frozen while the executor trains; the planner frozen at
the first run's trained adapter (`init_from`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch
from policies_fixtures import digest, greedy

from alight.api_models import RolloutQuery
from alight.schemas import Mode
from alight_server.inference.adapters import adapter_tensors
from alight_server.policies.routing import policy_of
from alight_server.stacks.kinds import EmbeddedStack
from alight_server.stacks.opening import TrainingStacks
from alight_server.stacks.run_store import open_run_store
from alight_server.trainer.backends.policy_set import PolicySet
from alight_server.trainer.config.run import TrainConfig, parse_config
from alight_server.trainer.report.summary import RunResult
from alight_server.trainer.run.checkpoint import latest_checkpoint, load_checkpoint
from alight_server.trainer.run.init_from import checkpoint_adapter
from alight_server.trainer.run.loop import TrainingRun
from alight_server.trainer.run.servers import RunStack
from alight_testing.tiny_run import tiny_run_config

pytestmark = pytest.mark.timeout(300)

AGENT = Path(__file__).parent / "agents" / "two_role_agent.py"
ROLES = ("planner", "executor")


class KeptStacks(TrainingStacks):
    """`alight train`'s stacks, keeping the engine, its adapters' hashes and greedy outputs as the run starts."""

    def __init__(self) -> None:
        super().__init__()
        self.engine: Any = None
        self.at_start: dict[str, tuple[str, Any]] = {}
        self.threads = 0  # torch's CPU threads as the run starts (its inference.torch_threads)

    def open_local(self, config: TrainConfig, run_dir: Path, backend: Any) -> RunStack:
        stack = super().open_local(config, run_dir, backend)
        assert isinstance(stack, EmbeddedStack)
        self.engine = stack.engine
        self.threads = torch.get_num_threads()
        self.at_start = {name: (digest(adapter_tensors(self.engine.model, name)), greedy(self.engine, name))
                         for name in ROLES}  # fmt: skip
        return stack

    def served_after(self) -> dict[str, tuple[str, Any]]:
        """Each adapter's hash and greedy outputs as the stopped run's engine serves them (started again).

        On as many torch threads as at the start: the same weights decoded on another count (the process's
        default, outside the run) sum in another order, logprobs up to ~1e-6 apart (measured on 1 against 2).
        With the count equal, equal weights give equal bits, which is what the tests compare.
        """
        outside = torch.get_num_threads()
        torch.set_num_threads(self.threads)  # the engine's threads start now and take this count
        try:
            with self.engine:
                return {name: (digest(adapter_tensors(self.engine.model, name)), greedy(self.engine, name))
                        for name in ROLES}  # fmt: skip
        finally:
            torch.set_num_threads(outside)


def two_role_config(folder: Path, planner: dict[str, Any], **overrides: Any) -> TrainConfig:
    tasks = [{"word": w} for w in ["apple", "river", "stone", "cloud"] * 3]
    raw = tiny_run_config(
        folder, f"{AGENT}:main", tasks,
        lora={"enabled": True, "r": 2, "alpha": 4}, optimizer={"lr": 2e-2}, steps=1, tasks_per_step=3,
        validation={"every": 0, "max_tasks": 1}, inference={"max_batch_size": 8, "prefix_cache_tokens": 0},
        policies={"planner": planner, "executor": {"reward": "answer"}},
        routing={"rules": [{"agent": "executor", "policy": "executor"}, {"agent": "planner", "policy": "planner"}]},
        **overrides,
    )  # fmt: skip
    return parse_config(raw, folder)


@dataclass
class Finished:
    config: TrainConfig
    run: TrainingRun
    result: RunResult
    stacks: KeptStacks
    after: dict[str, tuple[str, Any]]


def train(config: TrainConfig, resume: bool = False) -> Finished:
    stacks = KeptStacks()
    run = TrainingRun(config, stacks=stacks, resume=resume, show_progress=False)
    result = run.run()
    return Finished(config, run, result, stacks, stacks.served_after())


@pytest.fixture(scope="module")
def both_trained(tmp_path_factory: pytest.TempPathFactory) -> Finished:
    return train(two_role_config(tmp_path_factory.mktemp("both"), {"reward": "plan"}))


@pytest.fixture(scope="module")
def planner_frozen(tmp_path_factory: pytest.TempPathFactory) -> Finished:
    return train(two_role_config(tmp_path_factory.mktemp("frozen"), {"trainable": False}))


def test_two_trainable_policies_each_train_on_their_own_calls_and_inference_serves_both(
    both_trained: Finished,
) -> None:
    policies = both_trained.run.backend
    assert isinstance(policies, PolicySet) and list(policies.backends) == list(ROLES)
    step = next(r for r in both_trained.result.history if r["step"] == 1)
    for name in ROLES:
        assert step[f"policy/{name}/samples/rows"] > 0
        assert f"policy/{name}/train/loss" in step and f"policy/{name}/train/reward_mean" in step
        assert step[f"policy/{name}/policy_version"] == 1.0
        served, outputs = both_trained.after[name]
        assert served == digest(policies.weights(name)), f"inference does not serve {name}'s trained adapter"
        assert served != both_trained.stacks.at_start[name][0] and outputs != both_trained.stacks.at_start[name][1]
    assert step["samples/rows"] == step["policy/planner/samples/rows"] + step["policy/executor/samples/rows"]
    # every call is recorded with the policy its role's header routed it to
    store = open_run_store(both_trained.result.run_dir)
    calls = [c for r in store.list_rollouts(RolloutQuery(limit=1000)) for c in store.list_model_calls(r.id)]
    assert calls and all(
        policy_of(c.flags) == ("executor" if "\nNow define" in c.request["messages"][0]["content"] else "planner")
        for c in calls
    )  # fmt: skip


def test_resume_restores_both_adapters_and_optimizers_and_inference_serves_them_again(both_trained: Finished) -> None:
    saved = load_checkpoint(latest_checkpoint(both_trained.config.run_dir_checkpoints()))  # type: ignore[arg-type]
    resumed = train(both_trained.config, resume=True)  # steps: 1, done: nothing more to train
    policies = resumed.run.backend
    assert isinstance(policies, PolicySet)
    for name in ROLES:
        mine, theirs = policies.backends[name].state_dict(), saved["trainer"]["policies"][name]
        assert digest(mine["trainable"]) == digest(theirs["trainable"])
        moments = [{f"{p}.{k}": v for p, s in state["optimizer"]["state"].items() for k, v in s.items()}
                   for state in (mine, theirs)]  # fmt: skip
        assert moments[0] and digest(moments[0]) == digest(moments[1])
        # the new engine started from zero adapters and got the restored ones: greedy outputs as before the stop
        assert resumed.after[name] == both_trained.after[name]


def test_a_frozen_policy_is_served_bit_identical_while_the_other_trains(planner_frozen: Finished) -> None:
    policies = planner_frozen.run.backend
    assert isinstance(policies, PolicySet) and list(policies.backends) == ["executor"]
    assert planner_frozen.after["planner"] == planner_frozen.stacks.at_start["planner"]
    assert planner_frozen.after["executor"] != planner_frozen.stacks.at_start["executor"]
    step = next(r for r in planner_frozen.result.history if r["step"] == 1)
    assert step["policy/planner/samples/rows"] > 0 and "policy/planner/train/loss" not in step
    assert step["policy/planner/policy_version"] == 0.0 and step["policy/executor/policy_version"] == 1.0
    # the planner's greedy validation calls answer the same before and after the executor's step
    store = open_run_store(planner_frozen.result.run_dir)
    val = [r for r in store.list_rollouts(RolloutQuery(limit=1000)) if r.mode == Mode.VAL]
    plans = {
        r.metadata["step"]: [c.response_token_ids for c in store.list_model_calls(r.id) if policy_of(c.flags) == "planner"]
        for r in val
    }  # fmt: skip
    assert set(plans) == {0, 1} and plans[0] == plans[1]


def test_a_frozen_policy_starting_from_a_checkpoints_adapter_is_served_with_it(
    both_trained: Finished, tmp_path: Path
) -> None:
    earlier = str(both_trained.config.output_dir)
    started = train(two_role_config(tmp_path, {"trainable": False, "init_from": earlier}))
    assert started.after["planner"][0] == digest(checkpoint_adapter(Path(earlier), "planner"))
    # served as the earlier run's engine served its trained planner: greedy tokens and logprobs equal
    assert started.after["planner"] == both_trained.after["planner"]
    assert started.stacks.at_start["planner"] != started.after["planner"]  # the engine started from a zero adapter
