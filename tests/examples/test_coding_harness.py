"""The unmodified mini-swe-agent, driven by a scripted policy over real HTTP, in the example's sandbox."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from scripted_policy import bash_reply, scripted_policy

pytestmark = [pytest.mark.coding, pytest.mark.slow]
SUBMIT = bash_reply("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT")
TASKS = Path(__file__).resolve().parents[2] / "examples" / "coding" / "data" / "train.jsonl"


def first_task() -> dict[str, Any]:
    return json.loads(TASKS.read_text().splitlines()[0])


def undo_bug(task: dict[str, Any]) -> str:
    """The honest fix, as a shell command: put the mutated lines back as they were."""
    rw = task["rewrite"]
    script = (
        f"p = pathlib.Path({rw['file']!r}); p.write_text(p.read_text().replace({rw['after']!r}, {rw['before']!r}, 1))"
    )
    return f"python - <<'PY'\nimport pathlib\n{script}\nPY"


def run_episode(
    replies: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[float, list[dict[str, Any]], Path]:
    import agent

    with scripted_policy(replies) as (url, received):
        monkeypatch.setenv("OPENAI_BASE_URL", url)
        reward = agent.solve(first_task(), tmp_path)
    return reward, received, tmp_path / "session"


def test_mini_swe_agent_fixing_the_bug_through_the_sandbox_gets_reward_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    task = first_task()
    reward, received, session = run_episode(
        [bash_reply("ls"), bash_reply(undo_bug(task)), SUBMIT], tmp_path, monkeypatch
    )
    assert reward == 1.0
    assert len(received) == 3  # one model call per step, each through the OpenAI-compatible endpoint
    assert task["problem_statement"].splitlines()[0] in received[0]["messages"][1]["content"]
    commands = [json.loads(line)["command"][-1] for line in (session / "commands.jsonl").read_text().splitlines()]
    assert commands[0] == "ls"  # mini's actions ran through alight_sandbox.guards.launch, logged outside the sandbox


def test_mini_swe_agent_reading_the_canary_gets_reward_0(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    task = first_task()
    replies = [bash_reply("cat ~/.netrc"), bash_reply(undo_bug(task)), SUBMIT]
    reward, _, _ = run_episode(replies, tmp_path, monkeypatch)
    assert reward == 0.0
    assert "gate canary_read" in capsys.readouterr().out
