# pyright: strict
"""Codex (`codex exec`) as a rollout, in the sandbox: the Responses API through the forwarder, nothing else."""

from __future__ import annotations

import json
from typing import Any

import alight
from alight_sandbox.guards.policy import HOME
from alight_sandbox.harness.attempt import HarnessAttempt
from alight_sandbox.harness.environment import MCP_NAME, MCP_URL, STARTUP_S
from alight_sandbox.harness.sandbox import PLACEHOLDER_KEY, RELAY_URL, CliLaunch
from alight_sandbox.harness.workspace import CliTask, Workspace, cli_args, cli_episode, find_cli

DEFAULT_ARGS = ["--skip-git-repo-check"]
KEY_ENV = "OPENAI_API_KEY"  # Codex reads its provider's key from the variable the config names: a placeholder


def codex_config(endpoint: str, gateway_url: str, *, environment: bool = False) -> str:
    """config.toml for CODEX_HOME: one model provider (the relay to the gateway), no approvals, no update checks,
    and where the run serves an environment, its MCP server (streamable HTTP at the relay, which adds the token).

    Codex's own sandbox is off (`danger-full-access`): Codex runs inside alight's, whose only way out is the
    forwarder, and Codex's sandbox helper cannot start from a read-only install inside another sandbox.
    """
    url = json.dumps(endpoint.rstrip("/"))  # a TOML basic string is a JSON string
    mcp = [
        f"[mcp_servers.{MCP_NAME}]",
        f"url = {json.dumps(MCP_URL)}",
        f"startup_timeout_sec = {STARTUP_S}",  # its first tools/list opens the game
        "required = true",  # the first turn waits for its tools (an optional server's may come a turn late)
        "",
    ]
    return "\n".join(
        [
            f"# Calls to {endpoint} leave the sandbox through alight's forwarder, to this attempt's gateway:",
            f"# {gateway_url}",
            'model = "policy"',
            'model_provider = "alight"',
            'approval_policy = "never"',
            'sandbox_mode = "danger-full-access"',
            "check_for_update_on_startup = false",
            "",
            "[model_providers.alight]",
            'name = "alight gateway"',
            f"base_url = {url}",
            f'env_key = "{KEY_ENV}"',
            'wire_api = "responses"',
            "",
            "[history]",
            'persistence = "none"',
            "",
            "[analytics]",  # Codex's usage events: off, as Claude Code's telemetry is
            "enabled = false",
            "",
            *(mcp if environment else []),
        ]
    )


@alight.rollout
def episode(task: Any) -> float | None:
    """One attempt: `codex exec PROMPT` in the sandbox on a fresh workspace, then the task's check."""
    binary = find_cli("ALIGHT_CODEX_BIN", "codex", "npm i -g @openai/codex")

    def prepare(cli_task: CliTask, workspace: Workspace, attempt: HarnessAttempt, environment: bool) -> CliLaunch:
        config = codex_config(f"{RELAY_URL}/v1", attempt.gateway_url, environment=environment)
        env = {"CODEX_HOME": f"{HOME}/.codex", KEY_ENV: PLACEHOLDER_KEY}
        return CliLaunch(["exec", *cli_args(DEFAULT_ARGS), cli_task.prompt], env, {".codex/config.toml": config})

    return cli_episode(task, "codex", binary, prepare)
