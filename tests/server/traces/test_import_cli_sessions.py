"""Claude Code and Codex session files as the pinned CLIs write them: each CLI runs once through alight's gateway
(to the vLLM-shaped double, which makes it call its shell tool once), and its session file is imported."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from alight.schemas import Trajectory
from alight_sandbox.harness.codex import codex_config
from alight_server.traces.check import check_run
from alight_server.traces.formats import claude_code, codex
from alight_server.traces.importer import import_traces
from alight_server.trajectories.join import build_trajectory

ROOT = Path(__file__).resolve().parents[3]
BIN = ROOT / ".tools" / "cli" / "node_modules" / ".bin"
ALIGHT = str(Path(sys.executable).parent / "alight")
AGENT = Path(__file__).parent / "agents" / "cli_session_agent.py"


@dataclass
class Session:
    files: Path  # the CLI's session folder
    captured: Trajectory  # what alight's gateway recorded of the same run


def _run(cli: str, prompt: str, root: Path, upstream_url: str) -> Session:
    exe = BIN / cli
    if not exe.exists():
        pytest.skip(f"{cli} is not installed: bash scripts/setup.sh --cli")
    task = {"cli": cli, "bin": str(exe), "home": str(root / "home"), "work": str(root / "work"), "prompt": prompt,
            "config": codex_config("GATEWAY_URL", "this attempt's gateway")}  # fmt: skip
    done = subprocess.run(
        [ALIGHT, "run", f"{AGENT}:episode", "--task", json.dumps(task), "--upstream", upstream_url, "--model", "policy",
         "--json", "--timeout", "200"],
        capture_output=True, text=True, timeout=260, cwd=root,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    captured = Trajectory.model_validate_json(done.stdout)
    assert captured.final_reward == 1.0, "the CLI exited non-zero"
    folder = root / "home" / (".claude/projects" if cli == "claude" else ".codex/sessions")
    return Session(folder, captured)


@pytest.fixture(scope="module")
def claude_session(tmp_path_factory: pytest.TempPathFactory, upstream_url: str) -> Iterator[Session]:
    yield _run("claude", 'call Bash {"command": "echo hi > out.txt"}', tmp_path_factory.mktemp("claude"), upstream_url)


@pytest.fixture(scope="module")
def codex_session(tmp_path_factory: pytest.TempPathFactory, upstream_url: str) -> Iterator[Session]:
    yield _run(
        "codex", 'call exec_command {"cmd": "echo hi > out.txt"}', tmp_path_factory.mktemp("codex"), upstream_url
    )


def _replies(trajectory: Trajectory) -> list[tuple[str, list[tuple[str, str]]]]:
    """Each call's answer as (text, [(tool, arguments as JSON)]), whatever flavour recorded it."""
    return [
        (tc.output.text, [(t.name, json.dumps(_args(t.arguments), sort_keys=True)) for t in tc.output.tool_calls])
        for tc in trajectory.calls
    ]


def _args(arguments: object) -> object:
    return json.loads(arguments) if isinstance(arguments, str) else arguments


@pytest.mark.parametrize(("fixture", "reader", "fmt"), [
    ("claude_session", claude_code.read, "claude-code"), ("codex_session", codex.read, "codex"),
])  # fmt: skip
def test_a_cli_session_file_imports_the_calls_the_gateway_saw(request, fixture, reader, fmt, store, renderer):
    session: Session = request.getfixturevalue(fixture)
    parsed = reader([session.files])
    assert parsed.errors == []
    report = import_traces(store, "cli", fmt, parsed, renderer)
    (rollout,) = store.list_rollouts()
    imported = build_trajectory(store, rollout.id)
    # the same answers, call for call, as alight's own gateway recorded while the CLI ran
    assert _replies(imported) == _replies(session.captured)
    assert (report.calls["rendered"], report.calls["left_out"]) == (len(session.captured.calls), 0)
    assert any(tool for _, tools in _replies(imported) for tool in tools), "the CLI's shell tool call is in the session"
    last = imported.calls[-1].call.request["messages"][-1]
    assert last["role"] == "tool"  # the tool's result went back to the model
    check = check_run(store, "cli", decode=renderer.decode)
    assert check.trajectories[0].rows >= 1 and check.trajectories[0].rendered == len(session.captured.calls)


def test_reimporting_a_cli_session_stores_nothing_new(claude_session, store, renderer):
    first = import_traces(store, "cli", "claude-code", claude_code.read([claude_session.files]), renderer)
    calls = [store.list_model_calls(r.id) for r in store.list_rollouts()]
    again = import_traces(store, "cli", "claude-code", claude_code.read([claude_session.files]), renderer)
    assert (first.new_rollouts, again.new_rollouts) == (1, 0)
    assert [store.list_model_calls(r.id) for r in store.list_rollouts()] == calls


def test_entries_written_by_an_unknown_claude_code_version_are_reported(claude_session, tmp_path):
    (original,) = sorted(claude_session.files.rglob("*.jsonl"))
    entries = [json.loads(line) for line in original.read_text().splitlines()]
    for entry in entries:
        if "version" in entry:
            entry["version"] = "3.0.0"
    future = tmp_path / original.name
    future.write_text("".join(json.dumps(e) + "\n" for e in entries))
    parsed = claude_code.read([future])
    assert parsed.sessions == [] and parsed.errors
    assert all("Claude Code 3.0.0 wrote this entry" in e.message for e in parsed.errors)
