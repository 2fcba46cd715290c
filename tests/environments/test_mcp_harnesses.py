"""LangGraph and AutoGen agents play an MCP environment unchanged: the examples' agents under the real stack.

One stack for the module: alight's server on loopback serving TextWorldExpress's coin game as MCP tools (the
cheapest of the environments: a three-room game the package solves in three actions), its gateway's policy a
scripted upstream (scripted_upstream.py) whose tool calls play that solution; the tiny model calls no tools, so
it could not show the wiring. Each example agent runs under `alight run` as its own process: the ones that
convert the MCP tools themselves (the dev venv has mcp 2), and, where an agent environment with mcp 1.x exists
(`$ALIGHT_MCP1_PYTHON` or .venv-mcp1), the ones on langchain-mcp-adapters and autogen-ext's McpWorkbench.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

if shutil.which("java") is None or importlib.util.find_spec("textworld_express") is None:
    pytest.skip("java or textworld-express missing: bash scripts/setup.sh --scienceworld", allow_module_level=True)

from scripted_upstream import MODEL, create_scripted_upstream

from alight.client import AlightClient
from alight.schemas import UpstreamCreate
from alight_server.app import create_app
from alight_server.config import ServerConfig
from alight_server.http.auth import generate_admin_key
from alight_server.stacks.server_thread import ServerThread, free_port
from tests.environments.rollout_events import rollout_events

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "scienceworld_mcp"
ALIGHT = str(Path(sys.executable).parent / "alight")
PARAMS = "numLocations=3,numDistractorItems=0,includeDoors=0"
TASK = {"game": "coin", "seed": 10000, "fold": "dev", "params": PARAMS}  # its solution: the three acts below
SOLUTION = ["look around", "move east", "take coin"]
REFUSED = ("act", {"action": "look " * 61})  # over the 300 characters `act` takes: an isError result, no step
SCRIPT = [("observe", {}), REFUSED, *[("act", {"action": a}) for a in SOLUTION], ("score", {})]
# The agent environment of examples/scienceworld_mcp/adapters (mcp 1.x), outside the dev venv.
MCP1_PYTHON = Path(os.environ.get("ALIGHT_MCP1_PYTHON", REPO / ".venv-mcp1" / "bin" / "python"))


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, Any]]:
    """(server URL, admin key, the scripted upstream's app) of a server serving the coin game as MCP tools."""
    folder, key = tmp_path_factory.mktemp("stack"), generate_admin_key()
    config = ServerConfig(admin_key=key, db_url=f"sqlite:///{folder / 'alight.db'}", port=free_port(),
                          environment={"mcp": "textworld_express", "max_steps": 10})  # fmt: skip
    upstream = create_scripted_upstream(SCRIPT)
    with ServerThread(upstream) as upstream_url, ServerThread(create_app(config), port=config.port) as url:
        AlightClient(url, key).add_upstream(UpstreamCreate(id="policy", url=f"{upstream_url}/v1", model=MODEL))
        yield url, key, upstream


def run(stack: tuple[str, str, Any], *agent: str) -> dict[str, Any]:
    """`alight run` of `agent` (a function, or `--` and a command) on TASK against the module stack: its trajectory."""
    url, key, _ = stack
    argv = [ALIGHT, "run", "--json", "--server", url, "--admin-key", key, "--task", json.dumps(TASK), *agent]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=REPO)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return json.loads(proc.stdout)


def events(stack: tuple[str, str, Any], rollout_id: str, kind: str) -> list[dict[str, Any]]:
    return rollout_events(stack[0], stack[1], rollout_id, kind)


def assert_played(stack: tuple[str, str, Any], trajectory: dict[str, Any], upstream_calls: int) -> None:
    """Every model call captured, the script's tool calls made in order, the solved game's score the reward."""
    calls = trajectory["calls"]
    assert len(calls) == upstream_calls == len(SCRIPT) + 1  # each move, then "Done."
    assert all(c["call"]["status_code"] == 200 and c["call"]["response_token_ids"] for c in calls)
    made = events(stack, trajectory["rollout_id"], "environment_call")
    assert [(e["payload"]["tool"], json.loads(e["payload"]["arguments"])) for e in made] == SCRIPT
    assert [e["payload"]["refused"] for e in made] == [move == REFUSED for move in SCRIPT]  # and the agent went on
    assert made[-1]["payload"]["result"] == "1"  # the agent read the solved game's score through its tool
    (env,) = events(stack, trajectory["rollout_id"], "environment")
    assert env["payload"]["opened"] and env["payload"]["score"] == 1.0
    (reward,) = [r for r in trajectory["rewards"] if r["final"]]
    assert reward["source"] == "evaluator" and reward["value"] == 1.0  # the game's, posted by the server
    assert trajectory["final_reward"] == 1.0
    assert not [r for r in trajectory["rewards"] if r["source"] == "agent"]  # the agent scores nothing itself


@pytest.mark.parametrize("agent", ["langgraph_agent.py", "autogen_agent.py"])
def test_an_unchanged_harness_plays_the_game_through_mcp_and_the_games_score_is_its_reward(
    stack: tuple[str, str, Any], agent: str
) -> None:
    before = stack[2].state.calls
    trajectory = run(stack, f"{EXAMPLE / agent}:main")
    assert_played(stack, trajectory, stack[2].state.calls - before)


@pytest.mark.parametrize("agent", ["langgraph_agent.py", "autogen_agent.py"])
def test_the_frameworks_own_mcp_adapters_play_it_from_an_agent_environment_with_mcp_1(
    stack: tuple[str, str, Any], agent: str
) -> None:
    """langchain-mcp-adapters and autogen-ext's McpWorkbench need mcp<2: they run from their own venv."""
    if not MCP1_PYTHON.is_file():
        pytest.skip(f"no agent environment with mcp 1.x at {MCP1_PYTHON}: bash scripts/setup.sh --mcp1")
    before = stack[2].state.calls
    trajectory = run(stack, "--", str(MCP1_PYTHON), "-m", "alight.entry", f"{EXAMPLE / 'adapters' / agent}:main")
    assert_played(stack, trajectory, stack[2].state.calls - before)
