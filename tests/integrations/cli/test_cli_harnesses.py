"""The real Claude Code and Codex CLIs, unmodified, as rollouts: `alight run` → harness → CLI → gateway → upstream.

The upstream is the vLLM-shaped double: both CLIs send 10–50k-token prompts (their system prompts
and tool schemas), which no model this CPU machine can serve in test time; the double answers
with token ids like vLLM does and logs what it produced, so every call can be counted at both ends.
`call TOOL` in the prompt makes the double call that tool once, so each episode has a tool round trip.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from alight.schemas import ApiFlavour, Trajectory
from alight_server.stacks.server_thread import ServerThread
from alight_testing import FakeUpstreamState, create_fake_upstream

ROOT = Path(__file__).resolve().parents[3]
BIN = ROOT / ".tools" / "cli" / "node_modules" / ".bin"
ALIGHT = str(Path(sys.executable).parent / "alight")
INSTALL = "bash scripts/setup.sh --cli (installs the pinned CLIs into .tools/cli with npm)"


@pytest.fixture(scope="module")
def upstream() -> Iterator[tuple[str, FakeUpstreamState]]:
    app = create_fake_upstream(model="policy")
    with ServerThread(app) as url:
        yield url + "/v1", app.state.fake


def _episode(harness: str, binary: str, task: dict, upstream_url: str, tmp_path: Path) -> Trajectory:
    exe = BIN / binary
    if not exe.exists():
        pytest.skip(f"{binary} is not installed: {INSTALL}")
    if shutil.which("bwrap") is None:
        pytest.skip("the CLIs run in a bubblewrap sandbox: apt-get install -y bubblewrap")
    # The harness's settings go in as the agent's env (as agent.env in a config): no shell variable reaches it.
    settings = [f"--env=ALIGHT_{binary.upper()}_BIN={exe}", f"--env=ALIGHT_WORKSPACE_ROOT={tmp_path}"]
    done = subprocess.run(
        [ALIGHT, "run", f"alight_sandbox.harness.{harness}:episode", "--task", json.dumps(task), "--upstream", upstream_url,
         "--model", "policy", "--json", "--reveal", "--timeout", "240", *settings],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    return Trajectory.model_validate_json(done.stdout)


@pytest.mark.parametrize(
    ("harness", "binary", "tool", "flavour"),
    [
        pytest.param(
            "claude_code",
            "claude",
            "Bash",
            ApiFlavour.MESSAGES,
            marks=pytest.mark.harness(harness="Claude Code", api="messages", streamed=True, tools=True),
        ),
        pytest.param(
            "codex",
            "codex",
            "exec_command",
            ApiFlavour.RESPONSES,
            marks=pytest.mark.harness(harness="Codex", api="responses", streamed=True, tools=True),
        ),
    ],
)
def test_cli_episode_is_captured_call_for_call_and_rewarded_by_its_check(
    upstream, tmp_path, harness, binary, tool, flavour
):
    url, fake = upstream
    fake.calls.clear()
    task = {"prompt": f"call {tool}", "files": {"notes.txt": "hello\n"}, "check": "test -f notes.txt && echo 0.75"}
    trajectory = _episode(harness, binary, task, url, tmp_path)
    assert trajectory.state == "succeeded" and trajectory.final_reward == 0.75
    produced = [c.response for c in fake.calls if c.path.endswith("/chat/completions")]
    calls = [t.call for t in trajectory.calls]
    # one tool call, its result back to the policy, a final answer: every call at the upstream is stored
    assert len(calls) == len(produced) >= 2
    for call, answer in zip(calls, produced, strict=True):
        assert call.flavour == flavour and call.status_code == 200 and call.streamed
        assert call.prompt_token_ids == answer["prompt_token_ids"]
        assert call.response_token_ids == [t for c in answer["choices"] for t in c["token_ids"]]
        assert len(call.response_logprobs) == len(call.response_token_ids)
    assert any(tc.get("function", {}).get("name") == tool for tc in _tool_calls(produced[0]))
    # the CLI's configuration was written into the attempt's workspace, pointing at this attempt's gateway
    [home] = list(tmp_path.glob(f"{binary}*/home"))
    gateway = f"/gw/{trajectory.rollout_id}/{trajectory.attempt}"
    if harness == "codex":
        assert gateway in (home / ".codex" / "config.toml").read_text()


def _tool_calls(answer: dict) -> list[dict]:
    return [tc for c in answer["choices"] for tc in (c.get("message") or {}).get("tool_calls") or []]


def test_a_failing_check_gives_reward_zero(upstream, tmp_path):
    url, _ = upstream
    task = {"prompt": "say hello", "check": "grep -q fixed answer.txt"}
    trajectory = _episode("claude_code", "claude", task, url, tmp_path)
    assert trajectory.state == "succeeded" and trajectory.final_reward == 0.0
