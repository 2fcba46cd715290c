"""The ScienceWorld example on the real simulator: its own scoring, one episode through the gateway, one training step.

The environment is PyPI's `scienceworld`, unmodified (a JVM reached over py4j). The episode tests drive the real
agent with `alight run` against a scripted policy on loopback: what the policy says is known, so every model
call, every environment step and the reward can be checked against the simulator's own answer.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from scripted_policy import scripted_policy

from alight_server.trajectories.join import build_trajectory
from tests.examples.tiny_step import last_step, train_rollouts

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "scienceworld"
ALIGHT = str(Path(sys.executable).parent / "alight")
SETUP = "bash scripts/setup.sh --scienceworld"
# A dev variation of the shortest task: its gold path is 5 steps (teleport, look, focus, move to the red box).
TASK = {"task_name": "find-non-living-thing", "variation": 180, "simplification": "easy"}
SPAN = "execute_tool scienceworld"


@pytest.fixture(autouse=True, scope="module")
def simulator() -> None:
    if shutil.which("java") is None:
        pytest.skip(f"java missing: {SETUP} (apt-get install -y default-jre-headless, as root)")
    if importlib.util.find_spec("scienceworld") is None:
        pytest.skip(f"scienceworld missing: {SETUP}")


@pytest.fixture(scope="module")
def env() -> Iterator[Any]:
    """One simulator (a JVM: seconds to start) for every game this module plays directly, without alight."""
    from scienceworld import ScienceWorldEnv

    simulator = ScienceWorldEnv("", envStepLimit=50)
    yield simulator
    simulator.close()


@pytest.fixture(scope="module")
def gold(env: Any) -> list[str]:
    """The simulator's own solution of TASK."""
    env.load(TASK["task_name"], TASK["variation"], TASK["simplification"], generateGoldPath=True)
    return list(env.get_gold_action_sequence())


def scores_after(env: Any, actions: list[str]) -> list[int]:
    """The simulator's score after each of `actions` on TASK, played directly (no model, no alight)."""
    env.load(TASK["task_name"], TASK["variation"], TASK["simplification"])
    env.reset()
    return [int(env.step(action)[3]["score"]) for action in actions]


def play_episode(replies: list[str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """`alight run` on TASK with a policy that says `replies`: (the trajectory it printed, the requests the policy got)."""
    with scripted_policy(replies) as (url, received):
        argv = [
            ALIGHT, "run", str(EXAMPLE / "agent.py") + ":main", "--json",
            "--task", json.dumps(TASK), "--upstream", url, "--model", "scripted",
            "--env", f"SCIENCEWORLD_MAX_STEPS={len(replies)}",
        ]  # fmt: skip
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=240, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout), received


@pytest.fixture(scope="module")
def solved(gold: list[str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """An episode whose policy says the simulator's own solution, one command a call."""
    return play_episode(gold)


def test_the_real_environment_starts_and_scores_its_own_solution_100(env: Any, gold: list[str]) -> None:
    assert 3 <= len(gold) <= 10, gold
    scores = scores_after(env, gold)
    assert scores[-1] == 100, list(zip(gold, scores, strict=True))
    assert scores[0] < 100  # scored in stages, not all at once


def test_an_episode_through_the_gateway_is_captured_call_for_call(solved: Any, gold: list[str]) -> None:
    trajectory, received = solved
    calls = trajectory["calls"]
    assert len(received) == len(calls) == len(gold)
    steps = [s for s in trajectory["tool_spans"] if s["name"] == SPAN]
    assert [s["arguments"] for s in steps] == gold  # the model's command, as the simulator got it
    for i, (tc, step) in enumerate(zip(calls, steps, strict=True)):
        assert tc["call"]["status_code"] == 200 and tc["output"]["text"] == gold[i]
        assert step["after_call"] == i  # each step follows its own model call
        if i + 1 < len(calls):  # ... and the simulator's answer is what the next call showed the model
            assert received[i + 1]["messages"][-1] == {"role": "user", "content": step["result"]}
    assert received[0]["messages"][-1]["content"].startswith("Your task is to find a(n) non-living thing")


def test_the_environments_score_becomes_the_reward(solved: Any) -> None:
    trajectory, _ = solved
    assert trajectory["final_reward"] == 1.0  # solved: ScienceWorld's 100


def test_a_partial_episode_gets_the_environments_partial_score(env: Any, gold: list[str]) -> None:
    replies = [*gold[:-2], "look around"]  # stops short of focusing and moving the thing
    expected = scores_after(env, replies)[-1]
    assert 0 < expected < 100
    trajectory, _ = play_episode(replies)
    assert trajectory["final_reward"] == pytest.approx(expected / 100)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_one_training_step_runs_the_simulator_on_the_tiny_model(tmp_path: Path) -> None:
    argv = [
        ALIGHT, "train", str(EXAMPLE / "config.yaml"), "--quiet", "--steps", "1",
        "--output-dir", str(tmp_path),
        "--set", "model=tiny",
        "--set", "group_size=2",
        "--set", "tasks_per_step=1",
        # No validation before and after: two more episodes (a JVM start each) for the report, which the
        # examples' tiny_step.py checks (test_word_problems, test_search_qa) on the same `alight train` path.
        "--set", "dataset.val=null",
        "--set", "metrics.tensorboard=false",
        "--set", "controller.concurrency=2",
        "--set", 'agent.env.SCIENCEWORLD_MAX_STEPS="2"',
        "--set", "review.audit_share=0",  # an audited group would wait for a person, not train in this step
    ]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=840, cwd=REPO)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    step = last_step(tmp_path)
    assert step["step"] == 1 and step["rollouts/failed"] == 0 and step["rollouts/missing_reward"] == 0, step
    with train_rollouts(tmp_path, 2) as (store, rollouts):
        for rollout in rollouts:
            trajectory = build_trajectory(store, rollout.id)
            assert len(trajectory.calls) == 2 and all(c.call.response_token_ids for c in trajectory.calls)
            assert [s.name for s in trajectory.tool_spans].count(SPAN) == 2  # the simulator answered each
            assert trajectory.final_reward is not None and 0.0 <= trajectory.final_reward <= 1.0
