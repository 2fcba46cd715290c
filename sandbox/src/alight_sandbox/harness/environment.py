# pyright: strict
"""The run's environment, where it serves one: found at the attempt's gateway, given to the CLI as an MCP server.

A run with `environment:` serves each attempt's game as MCP tools at its gateway's /mcp (docs/environments.md);
a run without one answers 404 there. The harness asks once per attempt, from outside the sandbox with the
attempt token (an `initialize`, which opens no game); the CLI then reaches the same endpoint at MCP_URL, the
relay on its own loopback, whose forwarder passes POST /v1/mcp to this attempt's gateway and adds the token.
The game's score is posted by the server when the attempt ends: the CLI only plays.
"""

from __future__ import annotations

from typing import Any, cast

import httpx

from alight_sandbox.harness.attempt import HarnessAttempt
from alight_sandbox.harness.sandbox import RELAY_URL

MCP_NAME = "environment"  # the CLI's name for the server: Claude Code calls its tools mcp__environment__act, ...
MCP_URL = f"{RELAY_URL}/v1/mcp"  # inside the sandbox; the forwarder maps it onto the attempt's own gateway
STARTUP_S = 120  # the first tools/list opens the game (a JVM: seconds, more on a busy machine)
PROMPT = (
    f"Play the task in the environment through the tools of the MCP server `{MCP_NAME}`: call observe to read "
    "the task, then act with one command at a time (valid_actions lists the commands that work now). Stop when "
    "the task is done."
)
CLIENT = {"name": "alight-harness", "version": "1"}
INITIALIZE = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": CLIENT}}  # fmt: skip


def serves_environment(attempt: HarnessAttempt) -> bool:
    """Whether the attempt's run serves an environment: its gateway's /mcp answers an `initialize` (404: none)."""
    url = f"{attempt.gateway_url.rstrip('/')}/mcp"
    headers = {"Authorization": f"Bearer {attempt.token}", "Accept": "application/json, text/event-stream"}
    answer = httpx.post(url, json=INITIALIZE, headers=headers, timeout=30)
    if answer.status_code == 404:
        return False
    if answer.status_code != 200:
        raise RuntimeError(f"the attempt's MCP endpoint {url} answered {answer.status_code}: {answer.text[:300]}")
    return True


def with_prompt(task: Any) -> Any:
    """An environment's task as a CLI task: its own fields, and PROMPT where it has no prompt of its own."""
    if not isinstance(task, dict) or "prompt" in task:
        return cast(Any, task)
    return {**cast(dict[str, Any], task), "prompt": PROMPT}
