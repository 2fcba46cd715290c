# pyright: strict
"""Claude Code (`claude -p`) as a rollout, in the sandbox: the Messages API through the forwarder, nothing else."""

from __future__ import annotations

import json
from typing import Any

import alight
from alight_sandbox.guards.policy import HOME
from alight_sandbox.harness.attempt import HarnessAttempt
from alight_sandbox.harness.environment import MCP_NAME, MCP_URL, STARTUP_S
from alight_sandbox.harness.sandbox import PLACEHOLDER_KEY, RELAY_URL, CliLaunch
from alight_sandbox.harness.workspace import CliTask, Workspace, cli_args, cli_episode, find_cli

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
MCP_CONFIG = "mcp.json"  # under the sandbox's home: the environment's MCP server, where the run serves one


def mcp_launch() -> tuple[list[str], dict[str, str]]:
    """(arguments, home files) that give Claude Code the environment's MCP server and let its tools run unasked.

    Only this server (--strict-mcp-config: no user or project MCP config is read); `mcp__environment` allows
    every tool of that one server. Its address is the relay's, whose forwarder adds the attempt token."""
    config = {"mcpServers": {MCP_NAME: {"type": "http", "url": MCP_URL}}}
    argv = ["--mcp-config", f"{HOME}/{MCP_CONFIG}", "--strict-mcp-config", "--allowedTools", f"mcp__{MCP_NAME}"]
    return argv, {MCP_CONFIG: json.dumps(config, indent=2)}


def claude_env() -> dict[str, str]:
    """The CLI's variables in the sandbox: the relay as its Anthropic endpoint, a placeholder key, its settings in the tmpfs home."""
    return {
        **OFF,
        # Anthropic clients append /v1/messages to the base URL themselves.
        "ANTHROPIC_BASE_URL": RELAY_URL,
        "ANTHROPIC_API_KEY": PLACEHOLDER_KEY,  # the forwarder outside adds the attempt token
        "CLAUDE_CONFIG_DIR": f"{HOME}/.claude",
    }


@alight.rollout
def episode(task: Any) -> float | None:
    """One attempt: `claude -p PROMPT` in the sandbox on a fresh workspace, then the task's check."""
    binary = find_cli("ALIGHT_CLAUDE_BIN", "claude", "npm i -g @anthropic-ai/claude-code")

    def prepare(cli_task: CliTask, workspace: Workspace, attempt: HarnessAttempt, environment: bool) -> CliLaunch:
        argv, env, files = ["-p", cli_task.prompt, *cli_args(DEFAULT_ARGS)], claude_env(), {}
        if environment:
            mcp_argv, files = mcp_launch()
            argv += mcp_argv
            # The first turn waits for the server's tools (by default it waits 5 s, then goes on without them
            # and connects in the background: a game whose JVM starts slower would come a turn late).
            env |= {"MCP_CONNECTION_NONBLOCKING": "0", "MCP_CONNECT_TIMEOUT_MS": str(STARTUP_S * 1000),
                    "MCP_TIMEOUT": str(STARTUP_S * 1000)}  # fmt: skip
        return CliLaunch(argv, env, files)

    return cli_episode(task, "claude", binary, prepare)
