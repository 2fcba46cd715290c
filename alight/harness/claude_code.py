# pyright: strict
"""Claude Code (`claude -p`) as a rollout: the Messages API through this attempt's gateway, nothing else."""

from __future__ import annotations

import os
from typing import Any

import alight
from alight.harness.attempt import HarnessAttempt
from alight.harness.workspace import CliTask, Workspace, cli_args, cli_episode, find_cli

# Non-interactive: -p prints the final answer and exits; these tools run without asking.
DEFAULT_ARGS = ["--allowedTools", "Bash Edit Write Read Glob Grep"]
OFF = {  # Claude Code's own switches for everything that is not a model call
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_BUG_COMMAND": "1",
    "CLAUDE_CODE_ENABLE_TELEMETRY": "0",
}


def claude_env(base: dict[str, str], gateway_url: str, token: str, workspace: Workspace) -> dict[str, str]:
    """The CLI's environment: the gateway as its Anthropic endpoint, its settings in the workspace's home."""
    env = {k: v for k, v in base.items() if not k.startswith(("ANTHROPIC_", "CLAUDE_"))}
    env.update(OFF)
    env.update(
        {
            # Anthropic clients append /v1/messages to the base URL themselves.
            "ANTHROPIC_BASE_URL": gateway_url.rstrip("/").removesuffix("/v1"),
            "ANTHROPIC_API_KEY": token,
            "HOME": str(workspace.home),  # no settings, credentials or history of the machine's user
            "CLAUDE_CONFIG_DIR": str(workspace.home / ".claude"),
        }
    )
    return env


@alight.rollout
def episode(task: Any) -> float | None:
    """One attempt: `claude -p PROMPT` in a fresh workspace, then the task's check."""
    binary = find_cli("ALIGHT_CLAUDE_BIN", "claude", "npm i -g @anthropic-ai/claude-code")

    def prepare(cli_task: CliTask, workspace: Workspace, attempt: HarnessAttempt) -> tuple[list[str], dict[str, str]]:
        env = claude_env(dict(os.environ), attempt.gateway_url, attempt.token, workspace)
        return ["-p", cli_task.prompt, *cli_args(DEFAULT_ARGS)], env

    return cli_episode(task, "claude", binary, prepare)
