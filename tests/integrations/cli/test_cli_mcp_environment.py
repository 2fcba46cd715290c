"""Claude Code and Codex, unmodified and in their sandbox, play an MCP environment through the sandbox's forwarder.

The server runs with `environment: {mcp: textworld_express}` (the coin game on three rooms: a JVM per attempt,
in the server's process tree), and a second one with `{mcp: scienceworld}` for one episode per CLI; the policy is the vLLM-shaped double, whose prompt-scripted first answer calls
the environment's tools in order (`call mcp__environment__act {...}`) or the CLI's shell, and whose answer to
tool results is "Done.". The CLI reaches the tools only at `http://127.0.0.1:8417/v1/mcp` in its sandbox: the
relay, the forwarder outside (which adds the attempt token), the attempt's gateway. The game's score is the
reward, posted by the server; the task's check (the agent's side) reads the workspace and is outranked.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from alight.client import AlightClient
from alight.schemas import AttemptFinish, RolloutCreate, Trajectory
from alight_sandbox.guards.forwarder import Forwarder
from alight_sandbox.harness.environment import MCP_URL
from alight_server.app import create_app
from alight_server.config import ServerConfig
from alight_server.http.auth import generate_admin_key
from alight_server.stacks.one_rollout import embedded_server
from alight_server.stacks.server_thread import ServerThread, free_port
from alight_testing import FakeUpstreamState, create_fake_upstream
from tests.environments.rollout_events import rollout_events

ROOT = Path(__file__).resolve().parents[3]
BIN = ROOT / ".tools" / "cli" / "node_modules" / ".bin"
ALIGHT = str(Path(sys.executable).parent / "alight")
INSTALL = "bash scripts/setup.sh --cli (installs the pinned CLIs into .tools/cli with npm)"
PROBE = Path(__file__).with_name("mcp_probe.py")
# A dev seed of the coin game on three rooms without doors; the coin lies in the room the game starts in.
GAME = {"game": "coin", "seed": 10000, "fold": "dev", "params": "numLocations=3,numDistractorItems=0,includeDoors=0"}
PLAY = [("score", {}), ("observe", {}), ("act", {"action": "look around"}), ("act", {"action": "take coin"}),
        ("score", {})]  # fmt: skip
# A dev variation of ScienceWorld's find-non-living-thing, easy (teleporting allowed). It starts at 8 of 100; the
# teleport to the kitchen makes 25 and focusing on the chair there 75 (moving it to the red box would end at 100).
SCIENCE = {"task_name": "find-non-living-thing", "variation": 180, "simplification": "easy"}
SCIENCE_PLAY = [("score", {}), ("observe", {}), ("act", {"action": "teleport to kitchen"}),
                ("act", {"action": "focus on chair"}), ("score", {})]  # fmt: skip
CHECK = "cat score.txt 2>/dev/null || echo 0.25"  # the agent's own reward: 0.25, or what the workspace claims
# (harness, executable, how the double names the environment's tools: Codex's namespace reaches chat bare)
CLAUDE_CODE = ("claude_code", "claude", "mcp__environment__")
CLIS = [pytest.param(CLAUDE_CODE, id="claude-code"), pytest.param(("codex", "codex", ""), id="codex")]


@dataclass
class Episode:
    trajectory: Trajectory
    produced: list[dict[str, Any]]  # what the upstream answered, call by call
    tool_results: str  # what the policy got back from its tools
    home: Path  # the CLI's configuration as written for the sandbox


def serve(folder: Path, game: str) -> Iterator[tuple[str, str]]:
    """alight's server on loopback serving `game` (a Python package and its JVM) as each attempt's MCP tools."""
    if shutil.which("java") is None or importlib.util.find_spec(game) is None:
        pytest.skip(f"java or {game} missing: bash scripts/setup.sh --scienceworld")
    if shutil.which("bwrap") is None:
        pytest.skip("the CLIs run in a bubblewrap sandbox: apt-get install -y bubblewrap")
    key = generate_admin_key()
    config = ServerConfig(admin_key=key, db_url=f"sqlite:///{folder / 'alight.db'}", port=free_port(),
                          environment={"mcp": game, "max_steps": 8})  # fmt: skip
    with ServerThread(create_app(config), port=config.port) as url:
        yield url, key


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    yield from serve(tmp_path_factory.mktemp("server"), "textworld_express")


@pytest.fixture(scope="module")
def science_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    yield from serve(tmp_path_factory.mktemp("science"), "scienceworld")


@pytest.fixture(scope="module")
def upstream() -> Iterator[tuple[str, FakeUpstreamState]]:
    app = create_fake_upstream(model="policy", chat_rule=lambda m: "Done." if m[-1].get("role") == "tool" else None)
    with ServerThread(app) as url:
        yield url + "/v1", app.state.fake


def episode(server: tuple[str, str], upstream: tuple[str, FakeUpstreamState], cli: tuple[str, str, str],
            task: dict[str, Any], tmp: Path) -> Episode:  # fmt: skip
    harness, binary, _ = cli
    exe = BIN / binary
    if not exe.exists():
        pytest.skip(f"{binary} is not installed: {INSTALL}")
    (url, key), (upstream_url, fake) = server, upstream
    fake.calls.clear()
    settings = [f"--env=ALIGHT_{binary.upper()}_BIN={exe}", f"--env=ALIGHT_WORKSPACE_ROOT={tmp}"]
    done = subprocess.run(
        [ALIGHT, "run", f"alight_sandbox.harness.{harness}:episode", "--task", json.dumps(task),
         "--server", url, "--admin-key", key, "--upstream", upstream_url, "--model", "policy", "--json", "--reveal",
         "--timeout", "240", *settings],
        capture_output=True, text=True, timeout=300, cwd=tmp,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    produced = [c.response or {} for c in fake.calls if c.path.endswith("/chat/completions")]
    results = [m.get("content") for c in fake.calls for m in c.request.get("messages") or [] if m.get("role") == "tool"]
    [home] = list(tmp.glob(f"{binary}*/home"))
    text = "\n".join(r if isinstance(r, str) else json.dumps(r) for r in results)
    return Episode(Trajectory.model_validate_json(done.stdout), produced, text, home)


def events(server: tuple[str, str], rollout_id: str, kind: str) -> list[dict[str, Any]]:
    return rollout_events(*server, rollout_id, kind)


def scripted(cli: tuple[str, str, str], play: list[tuple[str, dict[str, Any]]]) -> str:
    """The prompt that has the double call `play`'s tools in order, by the names this CLI gives them."""
    return " ".join(f"call {cli[2]}{name} {json.dumps(arguments)}" for name, arguments in play)


@pytest.fixture(scope="module", params=CLIS)
def played(request, server, upstream, tmp_path_factory) -> Episode:
    task = {**GAME, "prompt": scripted(request.param, PLAY), "check": CHECK}
    return episode(server, upstream, request.param, task, tmp_path_factory.mktemp("cli"))


def assert_every_call_captured(played: Episode) -> None:
    calls = [t.call for t in played.trajectory.calls]
    assert len(calls) == len(played.produced) >= 2  # the tool calls, then the answer to their results
    for call, answer in zip(calls, played.produced, strict=True):
        assert call.status_code == 200 and call.prompt_token_ids == answer["prompt_token_ids"]
        assert call.response_token_ids == [t for c in answer["choices"] for t in c["token_ids"]]


def test_every_model_call_of_the_cli_reaches_the_gateway_and_is_captured(played):
    assert_every_call_captured(played)


def test_the_cli_played_the_game_through_its_mcp_tools_and_the_score_moved(played, server):
    made = events(server, played.trajectory.rollout_id, "environment_call")
    assert [(e["payload"]["tool"], json.loads(e["payload"]["arguments"])) for e in made] == PLAY
    assert [e["payload"]["result"] for e in made if e["payload"]["tool"] == "score"] == ["0", "1"]
    assert made[3]["payload"]["result"] == "You take the coin."


def test_the_reward_is_the_games_score_posted_by_the_server_not_the_agents(played):
    trajectory = played.trajectory
    assert trajectory.state == "succeeded" and trajectory.final_reward == 1.0
    assert [(r.value, r.final) for r in trajectory.rewards if r.source == "evaluator"] == [(1.0, True)]
    assert [r.value for r in trajectory.rewards if r.source == "agent"] == [0.25]  # the check's: recorded, outranked


def test_the_cli_is_configured_with_the_relay_and_never_the_token(played):
    written = "\n".join(p.read_text() for p in played.home.rglob("*") if p.is_file())
    assert MCP_URL in written and "alt1." not in written  # every attempt token starts so


@pytest.mark.parametrize("cli", CLIS)
def test_the_cli_plays_scienceworld_through_mcp_and_its_score_is_the_reward(cli, science_server, upstream, tmp_path):
    task = {**SCIENCE, "prompt": scripted(cli, SCIENCE_PLAY), "check": CHECK}
    played = episode(science_server, upstream, cli, task, tmp_path)
    assert_every_call_captured(played)
    made = events(science_server, played.trajectory.rollout_id, "environment_call")
    assert [(e["payload"]["tool"], json.loads(e["payload"]["arguments"])) for e in made] == SCIENCE_PLAY
    assert made[1]["payload"]["result"].startswith("Your task is to find a(n) non-living thing")
    assert [e["payload"]["result"] for e in made[2:4]] == ["You teleport to the kitchen.", "You focus on the chair."]
    assert [e["payload"]["result"] for e in made if e["payload"]["tool"] == "score"] == ["0.08", "0.75"]
    (env,) = events(science_server, played.trajectory.rollout_id, "environment")
    assert env["payload"]["environment"] == "scienceworld" and env["payload"]["opened"]
    trajectory = played.trajectory  # ScienceWorld's 75 of 100, not the agent's 0.25
    assert trajectory.state == "succeeded" and trajectory.final_reward == env["payload"]["score"] == 0.75
    assert [(r.value, r.final) for r in trajectory.rewards if r.source == "evaluator"] == [(0.75, True)]
    assert [r.value for r in trajectory.rewards if r.source == "agent"] == [0.25]


@pytest.fixture(scope="module")
def attacked(server, upstream, tmp_path_factory) -> Episode:
    """Claude Code's shell runs mcp_probe.py: every way out it tries, and a forged score in the workspace."""
    port = int(server[0].rsplit(":", 1)[1])
    task = {**GAME, "prompt": f"call Bash {json.dumps({'command': f'python3 mcp_probe.py {port}'})}",
            "files": {"mcp_probe.py": PROBE.read_text()}, "check": CHECK}  # fmt: skip
    return episode(server, upstream, CLAUDE_CODE, task, tmp_path_factory.mktemp("attack"))


def tried(attacked: Episode, name: str) -> str:
    found = re.search(rf"^{name} (.*)$", attacked.tool_results, re.M)
    assert found, f"no {name} line in the probe's output:\n{attacked.tool_results[:3000]}"
    return found.group(1)


REFUSED = ["other_rollout", "dotdot", "mcp_dotdot", "encoded_dotdot", "encoded_slash", "double_slash",
           "inner_double_slash", "trailing_slash", "admin", "reward"]  # fmt: skip


@pytest.mark.parametrize("name", REFUSED)
def test_the_shell_reaches_no_other_path_through_the_forwarder(attacked, name):
    assert tried(attacked, name).startswith("403 ")


@pytest.mark.parametrize("name", ["other_rollout_absolute", "query_rollout", "query_path"])
def test_other_request_forms_and_queries_are_malformed_for_the_forwarder(attacked, name):
    assert tried(attacked, name).startswith("400 ")


def test_the_mcp_endpoint_takes_posts_only(attacked):
    assert tried(attacked, "stream").startswith("405 ") and tried(attacked, "end_session").startswith("405 ")


def test_a_score_setting_tool_does_not_exist(attacked):
    answer = tried(attacked, "set_score_tool")
    assert answer.startswith("200 ") and "isError" in answer and "no tool 'set_score'" in answer


def test_a_host_header_naming_the_server_still_reaches_only_this_attempts_game(attacked, server):
    assert tried(attacked, "host_header").startswith("200 ")
    made = events(server, attacked.trajectory.rollout_id, "environment_call")
    assert [json.loads(e["payload"]["arguments"]) for e in made if e["payload"]["tool"] == "act"] == [
        {"action": "look around"}
    ]


def test_the_token_is_not_in_the_sandbox_and_the_server_is_unreachable(attacked):
    assert tried(attacked, "token_in_env").startswith("0 ") and "alt1." not in attacked.tool_results
    assert tried(attacked, "direct_server").startswith("refused ")


def test_a_forged_score_file_and_the_agents_reward_count_for_nothing(attacked, server):
    assert tried(attacked, "forged") == "written"
    trajectory = attacked.trajectory
    assert [r.value for r in trajectory.rewards if r.source == "agent"] == [1.0]  # the check read the forged file
    assert trajectory.final_reward == 0.0  # the game's: the coin was never taken
    assert [(r.value, r.final) for r in trajectory.rewards if r.source == "evaluator"] == [(0.0, True)]
    (env,) = events(server, trajectory.rollout_id, "environment")
    assert env["payload"]["score"] == 0.0 and env["payload"]["opened"]


def test_through_the_forwarder_a_finished_attempts_game_answers_409(server, tmp_path):
    url, key = server
    with AlightClient(url, key) as client:
        (rollout,) = client.create_rollouts([RolloutCreate(task=GAME)])
        (start,) = client.claim_attempts(1, ids=[rollout.id])
        socket_path = tmp_path / "gw.sock"
        params = {"name": "act", "arguments": {"action": "take coin"}}
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
        with Forwarder(socket_path, start.gateway_base_url, start.token), mcp_client(socket_path) as http:
            assert http.post("/v1/mcp", json=body).json()["result"]["content"][0]["text"] == "You take the coin."
            client.finish_attempt(rollout.id, start.attempt, AttemptFinish(status="succeeded"))
            late = http.post("/v1/mcp", json=body)
        rewards = client.list_rewards(rollout.id)
    assert late.status_code == 409 and "is not running: no game" in late.text
    assert [(r.value, r.source, r.final) for r in rewards] == [(1.0, "evaluator", True)]


def test_without_an_environment_the_mcp_route_is_404_and_the_harness_configures_none(tmp_path):
    from alight_sandbox.harness.attempt import HarnessAttempt
    from alight_sandbox.harness.environment import serves_environment

    with embedded_server(tmp_path) as (url, key), AlightClient(url, key) as client:
        (rollout,) = client.create_rollouts([RolloutCreate(task=GAME)])
        (start,) = client.claim_attempts(1, ids=[rollout.id])
        with (
            Forwarder(tmp_path / "gw.sock", start.gateway_base_url, start.token),
            mcp_client(tmp_path / "gw.sock") as http,
        ):
            answer = http.post("/v1/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        attempt = HarnessAttempt(rollout.id, start.attempt, start.gateway_base_url, start.token)
        assert not serves_environment(attempt)
    assert answer.status_code == 404


def mcp_client(socket_path: Path) -> httpx.Client:
    headers = {"Accept": "application/json, text/event-stream"}
    return httpx.Client(
        transport=httpx.HTTPTransport(uds=str(socket_path)), base_url="http://sandbox", headers=headers, timeout=60
    )
