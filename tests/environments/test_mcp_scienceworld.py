"""ScienceWorld served as MCP tools per attempt: real simulator (JVM), real server on loopback, real agents.

One stack for the module: `alight run`'s policy server (the tiny model, the environment in the server's process
tree). Two attempts, one JVM each: the unmodified Agents SDK agent of examples/scienceworld_mcp on the tiny model,
and a scripted player that plays part of the simulator's own solution and then attacks its reward.
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

import httpx
import psutil
import pytest

from tests.environments.rollout_events import rollout_events

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "scienceworld_mcp"
ALIGHT = str(Path(sys.executable).parent / "alight")
TASK = {"task_name": "find-non-living-thing", "variation": 180, "simplification": "easy"}
# The simulator's own solution of TASK is these six steps then 'move chair to red box' (100); it scores 75 here.
SCRIPT = ["open door to hallway", "go to hallway", "open door to kitchen", "go to kitchen", "look around",
          "focus on chair"]  # fmt: skip
PARTIAL_SCORE = 0.75
START_SCORE = 0.08  # the easy find tasks give 8 of 100 before the first action


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    if shutil.which("java") is None or importlib.util.find_spec("scienceworld") is None:
        pytest.skip("java or scienceworld missing: bash scripts/setup.sh --scienceworld")
    if importlib.util.find_spec("alight_environments") is None:
        pytest.skip("alight-environments missing: bash scripts/setup.sh")
    from alight_server.stacks.one_rollout import policy_server

    folder = tmp_path_factory.mktemp("stack")
    (folder / "tasks.jsonl").write_text(json.dumps(TASK) + "\n")  # `alight run --task` plays; a config needs one
    config = {"model": "tiny", "environment": {"mcp": "scienceworld", "max_steps": 20},
              "dataset": {"train": "tasks.jsonl"}, "agent": {"entrypoint": str(EXAMPLE / "agent.py") + ":main"}}  # fmt: skip
    (folder / "config.yaml").write_text(json.dumps(config))  # YAML is a superset of JSON
    with policy_server(folder, folder / "config.yaml") as (url, key, _):
        yield url, key


def run(stack: tuple[str, str], task: dict[str, Any], *agent: str) -> dict[str, Any]:
    """`alight run` of `agent` (a function, or `--` and a command) against the module's stack: its trajectory."""
    url, key = stack
    argv = [ALIGHT, "run", "--json", "--server", url, "--admin-key", key, "--task", json.dumps(task), *agent]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=REPO)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return json.loads(proc.stdout)


def events(stack: tuple[str, str], rollout_id: str, kind: str) -> list[dict[str, Any]]:
    return rollout_events(*stack, rollout_id, kind)


@pytest.fixture(scope="module")
def sdk_episode(stack: tuple[str, str]) -> dict[str, Any]:
    return run(stack, TASK, str(EXAMPLE / "agent.py") + ":main")


@pytest.fixture(scope="module")
def forged(stack: tuple[str, str], tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, Any]]:
    report = tmp_path_factory.mktemp("forger") / "report.json"
    trajectory = run(stack, {**TASK, "script": SCRIPT, "report": str(report)},
                     str(Path(__file__).parent / "mcp_forger.py") + ":main")  # fmt: skip
    return trajectory, json.loads(report.read_text())


def test_an_agents_sdk_agent_plays_through_mcp_on_the_tiny_model_every_call_captured(
    stack: tuple[str, str], sdk_episode: dict[str, Any]
) -> None:
    calls = sdk_episode["calls"]
    assert calls and all(c["call"]["status_code"] == 200 and c["call"]["response_token_ids"] for c in calls)
    (env,) = events(stack, sdk_episode["rollout_id"], "environment")
    assert env["payload"]["opened"] and env["payload"]["environment"] == "scienceworld"  # it listed the tools
    made = events(stack, sdk_episode["rollout_id"], "environment_call")
    spans = [s for s in sdk_episode["tool_spans"] if s["name"].startswith("execute_tool")]
    assert len(made) == len(spans)  # every tool call the SDK made reached the server and was recorded there
    assert sdk_episode["final_reward"] == env["payload"]["score"]
    (reward,) = [r for r in sdk_episode["rewards"] if r["final"]]
    assert reward["source"] == "evaluator"  # posted by the server, not the agent (which returned nothing)


def test_the_environments_score_is_the_reward_though_the_agent_never_called_score(
    stack: tuple[str, str], forged: tuple[dict[str, Any], dict[str, Any]]
) -> None:
    trajectory, report = forged
    assert report["tools"] == ["observe", "act", "valid_actions", "score"]
    assert report["observe"].startswith("Your task is to find a(n) non-living thing")
    assert "look around" in report["valid_actions"]
    made = events(stack, trajectory["rollout_id"], "environment_call")
    assert [json.loads(e["payload"]["arguments"]).get("action") for e in made if e["payload"]["tool"] == "act"][
        :6
    ] == SCRIPT
    assert "score" not in {e["payload"]["tool"] for e in made}
    assert trajectory["final_reward"] == pytest.approx(PARTIAL_SCORE)  # the game's 75 / 100, not the agent's 1.0


def test_forging_the_score_gets_nothing(forged: tuple[dict[str, Any], dict[str, Any]]) -> None:
    trajectory, report = forged
    assert report["unknown_tool"]["isError"] and "no tool 'set_score'" in report["unknown_tool"]["content"][0]["text"]
    assert report["extra_argument"]["isError"]
    assert report["evaluator_reward"] == 403  # an attempt token posts agent rewards only
    assert report["other_attempt"] == 403 and report["no_token"] == 401
    assert trajectory["final_reward"] == pytest.approx(PARTIAL_SCORE)  # not the agent's 1.0, nor the score file's
    agent = [r for r in trajectory["rewards"] if r["source"] == "agent"]
    assert [r["value"] for r in agent] == [1.0]  # recorded, and outranked


def test_an_agent_that_never_connects_scores_the_games_start_as_one_that_connected_and_did_nothing(
    stack: tuple[str, str],
) -> None:
    trajectory = run(stack, TASK, "--", sys.executable, "-c", "pass")  # exits 0 without a tool call
    assert not events(stack, trajectory["rollout_id"], "environment_call")
    (env,) = events(stack, trajectory["rollout_id"], "environment")
    assert not env["payload"]["opened"]  # the agent never opened it: the server opened it at the end to score it
    assert trajectory["final_reward"] == pytest.approx(START_SCORE)  # not 0: the game's own start
    (reward,) = [r for r in trajectory["rewards"] if r["final"]]
    assert reward["source"] == "evaluator"
    assert env["payload"]["process_id"] and not psutil.pid_exists(env["payload"]["process_id"])


def test_no_jvm_outlives_its_attempt(
    stack: tuple[str, str], sdk_episode: dict[str, Any], forged: tuple[dict[str, Any], dict[str, Any]]
) -> None:
    for trajectory in (sdk_episode, forged[0]):
        (env,) = events(stack, trajectory["rollout_id"], "environment")
        pid = env["payload"]["process_id"]
        assert pid and not psutil.pid_exists(pid), f"the game's JVM {pid} is still running"
    assert not [p for p in psutil.Process().children(recursive=True) if p.name() == "java"]


def test_a_finished_attempts_game_cannot_be_reopened(
    stack: tuple[str, str], forged: tuple[dict[str, Any], dict[str, Any]]
) -> None:
    url, _ = stack
    trajectory, report = forged  # the attempt's token stays valid a short grace after its end: its game does not
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "observe", "arguments": {}}}
    got = httpx.post(f"{url}/gw/{trajectory['rollout_id']}/1/v1/mcp", json=body,
                     headers={"Authorization": f"Bearer {report['token']}"})  # fmt: skip
    assert got.status_code == 409, got.text


def test_the_config_names_the_environment_and_its_tasks_are_its_own_disjoint_splits(stack: tuple[str, str]) -> None:
    from alight_server.trainer.config.run import load_config
    from alight_server.trainer.run.dataset import load_splits

    config = load_config(EXAMPLE / "config.yaml")  # environment: and no dataset:, no scorer, no task file
    splits = load_splits(config.dataset, seed=0)
    assert len(splits.val) == 8 and len(splits.train) > 100  # find-non-living-thing: its train variations, all
    variations = {part: {t["variation"] for t in rows} for part, rows in (("train", splits.train), ("val", splits.val))}
    assert not variations["train"] & variations["val"]
    assert TASK["variation"] not in variations["train"]  # the tests' variation is a dev one
    assert {t["task_name"] for t in splits.train + splits.val} == {"find-non-living-thing"}
