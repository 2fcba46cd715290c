# pyright: strict
"""Codex (`codex exec`) as a rollout: the Responses API through this attempt's gateway, nothing else."""

from __future__ import annotations

import json
import os
from typing import Any

import alight
from alight.harness.attempt import HarnessAttempt
from alight.harness.workspace import CliTask, Workspace, cli_args, cli_episode, find_cli

DEFAULT_ARGS = ["--skip-git-repo-check"]
TOKEN_ENV = "ALIGHT_TOKEN"  # Codex reads its provider's key from the variable the config names


def codex_config(gateway_url: str) -> str:
    """config.toml for CODEX_HOME: one model provider (the gateway), no approvals, no update checks.

    Codex's own sandbox is off (`danger-full-access`): the attempt's isolation is the runner's (a
    container, or the coding example's sandbox), and Codex's sandbox helper cannot start from a
    temporary folder.
    """
    url = json.dumps(gateway_url.rstrip("/"))  # a TOML basic string is a JSON string
    return "\n".join(
        [
            'model = "policy"',
            'model_provider = "alight"',
            'approval_policy = "never"',
            'sandbox_mode = "danger-full-access"',
            "check_for_update_on_startup = false",
            "",
            "[model_providers.alight]",
            'name = "alight gateway"',
            f"base_url = {url}",
            f'env_key = "{TOKEN_ENV}"',
            'wire_api = "responses"',
            "",
            "[history]",
            'persistence = "none"',
            "",
        ]
    )


def codex_env(base: dict[str, str], token: str, workspace: Workspace) -> dict[str, str]:
    env = {k: v for k, v in base.items() if not k.startswith("CODEX_")}
    home = workspace.home / ".codex"
    env.update({"HOME": str(workspace.home), "CODEX_HOME": str(home), TOKEN_ENV: token})
    return env


@alight.rollout
def episode(task: Any) -> float | None:
    """One attempt: `codex exec PROMPT` in a fresh workspace, then the task's check."""
    binary = find_cli("ALIGHT_CODEX_BIN", "codex", "npm i -g @openai/codex")

    def prepare(cli_task: CliTask, workspace: Workspace, attempt: HarnessAttempt) -> tuple[list[str], dict[str, str]]:
        (workspace.home / ".codex").mkdir()
        (workspace.home / ".codex" / "config.toml").write_text(codex_config(attempt.gateway_url))
        return ["exec", *cli_args(DEFAULT_ARGS), cli_task.prompt], codex_env(dict(os.environ), attempt.token, workspace)

    return cli_episode(task, "codex", binary, prepare)
