"""The framework examples on the tiny model: one trains a step end to end, every one runs its agent from its config.

The training path after the agent (gateway records, samples, the update, the push to inference) is the same
for every example, so CI trains one of them (openai_agents: the Responses API, the gateway's translated
path); the others' full runs are opt-in: `.venv/bin/pytest -m examples_train
tests/integrations/test_integration_examples_train.py` (about 45 s each on 2 cores). Every example's own
part, its config and its agent on the framework, runs by default: the config as `alight train` loads it,
its entrypoint on a task of its dataset, the tiny model's replies through the gateway, a reward, samples
(openai_agents' in its training step, the others' in one rollout each).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from mcp.client import Client
from safetensors.torch import load_file

from alight.api_models import RolloutQuery
from alight.schemas import TERMINAL_STATES, Mode
from alight_mcp import reward_in_result
from alight_mcp.calculator import create_calculator
from alight_server.inference.models import resolve_model
from alight_server.stacks.run_store import open_run_store
from alight_server.trainer.config.run import load_config
from alight_server.trainer.run.checkpoint import latest_checkpoint, load_checkpoint
from alight_server.trainer.run.dataset import read_tasks
from alight_server.trainer.step.samples import SampleConfig, build_samples
from alight_server.trajectories.join import build_trajectory

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = ["openai_agents", "langchain", "autogen", "mcp"]
TRAINED_IN_CI = "openai_agents"
# The examples give partial credit for a near-miss number, so even the random-weight tiny model's rollouts
# score differently. What can still make a group uniform, leaving nothing to learn: every reply without a
# number (scored 0), or every reply ending on the same number. Measured over 10 runs of each example
# (40 groups of 8): 5-7% of rollouts scored 0, every group had at least 4 distinct rewards; even at a 30%
# zero rate an 8-rollout group is uniform in 0.3**8, under 1 in 10,000 runs (2 rollouts: 1 in 11).
GROUP_SIZE = 8
# The smallest run that still goes through everything the example's config sets up: the embedded stack,
# the example's agent through the gateway, one group of rollouts, samples and one training step.
# Where the time went before (about 3 minutes per example on 2 busy cores): validation before and after
# training (two more sequential rollout phases, each paying an agent process start and a 256-token reply),
# tensorboard's import, and torch threads fighting the agent processes for the two cores.
SHORT_RUN = [
    "--steps", "1",
    "--set", f"group_size={GROUP_SIZE}",
    "--set", "tasks_per_step=1",
    "--set", "dataset.val_size=0",  # no held-out tasks: no validation phases
    "--set", "checkpoint.every=0",  # one checkpoint, at the end
    "--set", "metrics.tensorboard=false",
    "--set", "inference.torch_threads=1",
    "--set", "controller.concurrency=8",  # the whole group in one wave: the engine batches all 8 replies
    # Each attempt forked from one process that imported the agent (docs/controller.md, preloaded starts):
    # eight fresh interpreters importing the Agents SDK, alight and OpenTelemetry were ~2 CPU-s each.
    "--set", "controller.preload=true",
    "--set", "rollout_timeout_s=200",  # 8 agents starting at once on 2 busy cores
    "--set", "review.audit_share=0",  # an audited group would wait for a person, not train in this step
]  # fmt: skip


async def test_check_answer_gives_the_examples_partial_credit_only_when_asked() -> None:
    async def reward(answer: str, **options: bool) -> float | None:
        result = await client.call_tool("check_answer", {"answer": answer, "expected": 84, **options})
        found = reward_in_result(result)
        return found.value if found else None

    async with Client(create_calculator()) as client:
        assert await reward("so it is 84.", partial_credit=True) == 1.0
        assert await reward("83") == 0.0  # the default stays exact-match, as before
        assert await reward("83", partial_credit=True) == pytest.approx(0.5 / (1 + 1 / 84))
        assert await reward("about 1,000", partial_credit=True) == pytest.approx(0.5 / (1 + 916 / 84))
        assert await reward("no number here", partial_credit=True) == 0.0


@pytest.mark.timeout(200)
# The example CI trains is left out: its training test runs the same agent from the same config on a task of
# its dataset, through the gateway to the tiny model, and asserts a reward in [0, 1] and samples for each of
# its 8 rollouts (the opt-in ones are kept here: their training runs only with -m examples_train).
@pytest.mark.parametrize("example", [e for e in EXAMPLES if e != TRAINED_IN_CI])
def test_example_agent_started_from_its_config_finishes_a_rollout_on_the_tiny_model(example: str, tiny_stack) -> None:
    config = load_config(REPO / "examples" / example / "config.yaml")
    assert config.agent.entrypoint is not None and config.dataset.train is not None
    task = read_tasks(config.dataset.train)[0]
    run = tiny_stack.run_agent(config.agent.entrypoint, task, timeout_s=180, cwd=Path(config.agent.cwd or REPO))
    assert run.returncode == 0, run.output
    trajectory = tiny_stack.trajectory(run)
    assert trajectory.calls, run.output
    for tc in trajectory.calls:  # the tiny model answered every call the framework made, through the gateway
        assert tc.call.status_code == 200 and tc.call.response_token_ids and tc.call.response_logprobs, tc.call
    assert trajectory.final_reward is not None and 0.0 <= trajectory.final_reward <= 1.0, trajectory.rewards
    batch, report = build_samples([trajectory], SampleConfig.from_section(config.samples))
    assert batch.row_calls, report  # what the trainer would train on


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    "example", [e if e == TRAINED_IN_CI else pytest.param(e, marks=pytest.mark.examples_train) for e in EXAMPLES]
)
def test_example_trains_one_step_on_the_tiny_model(example: str, tmp_path: Path) -> None:
    config = REPO / "examples" / example / "config.yaml"
    cmd = [
        str(Path(sys.executable).parent / "alight"),
        "train",
        str(config),
        "--output-dir",
        str(tmp_path),
        "--quiet",
        *SHORT_RUN,
    ]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=280)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    steps = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    trained = [s for s in steps if s.get("step") == 1 and "train/groups" in s]
    assert trained, steps
    step = trained[0]
    # Every rollout of the step ran the agent to the end and came back with a reward and trainable calls.
    assert step["rollouts/failed"] == 0 and step["rollouts/missing_reward"] == 0, step
    assert step["samples/rows"] >= GROUP_SIZE and step["perf/generated_tokens"] > 0, step
    # The group's rewards differed, so the step trained: an optimizer update with a nonzero gradient, and the
    # new weights pushed to inference as policy version 1.
    assert step["train/groups"] == 1 and step["train/uniform_groups"] == 0, step
    assert step["train/updates"] >= 1 and step["train/grad_norm"] > 0, step
    assert step["policy_version"] == 1, step
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["steps"] == 1 and summary["policy_version"] == 1, summary

    # The checkpoint's weights are not the tiny model's initial ones: the update really changed parameters.
    checkpoint = latest_checkpoint(tmp_path / "checkpoints")
    assert checkpoint is not None, list((tmp_path / "checkpoints").iterdir())
    trainer_state = load_checkpoint(checkpoint)["trainer"]
    initial = load_file(str(resolve_model("tiny") / "model.safetensors"))
    trained_weights = trainer_state["trainable"]
    # The checkpoint names every parameter; the model file stores the tied lm_head once, as the embeddings.
    tied = {"lm_head.weight"}
    assert trainer_state["updates"] >= 1 and set(trained_weights) - tied <= set(initial), sorted(trained_weights)[:5]
    changed = [n for n, tensor in trained_weights.items() if n in initial and not torch.equal(tensor, initial[n])]
    assert changed, "no parameter differs from the initial tiny model after a training step"

    # The rollouts in the run's own store: one group of train rollouts, all terminal, each with its
    # model calls served through the gateway (by policy version 0) with token ids and a reward in [0, 1].
    store = open_run_store(tmp_path)
    try:
        # Version 1 reached the gateway: it is the version the gateway now stamps on model calls.
        assert store.current_policy_version() == 1, store.list_policy_versions()
        rollouts = store.list_rollouts(RolloutQuery(limit=100))
        assert [r.mode for r in rollouts] == [Mode.TRAIN] * GROUP_SIZE, [(r.id, r.mode) for r in rollouts]
        assert len({r.group_id for r in rollouts}) == 1
        assert all(r.state in TERMINAL_STATES for r in rollouts), [(r.id, r.state) for r in rollouts]
        rewards = []
        for rollout in rollouts:
            calls = store.list_model_calls(rollout.id)
            assert calls and all(c.response_token_ids and c.policy_version == 0 for c in calls), rollout.id
            rewards.append(build_trajectory(store, rollout.id).final_reward)
        assert all(r is not None and 0.0 <= r <= 1.0 for r in rewards), rewards
        assert len(set(rewards)) > 1, rewards
    finally:
        store.close()
