"""What this example's agents read the same way: the model and its limits, the instructions, the MCP server."""

from __future__ import annotations

import os

MODEL = os.environ.get("AGENT_MODEL", "policy")  # the gateway serves the policy being trained whatever the name
MAX_TOKENS = int(os.environ.get("SCIENCEWORLD_MAX_TOKENS", "64"))
MAX_TURNS = int(os.environ.get("SCIENCEWORLD_MAX_TURNS", "12"))
INSTRUCTIONS = os.environ.get("SCIENCEWORLD_INSTRUCTIONS") or (  # a config's agent.env may show a model more
    "You play a text simulation through tools. Call observe to read the task, then act with one command at a "
    "time (valid_actions lists the commands that work now). Stop when the task is done."
)


def mcp_server() -> tuple[str, dict[str, str]]:
    """This attempt's MCP server: its URL beside the gateway ($OPENAI_BASE_URL/mcp), and its token as the bearer."""
    url = os.environ["OPENAI_BASE_URL"].rstrip("/") + "/mcp"
    return url, {"Authorization": f"Bearer {os.environ['OPENAI_API_KEY']}"}
