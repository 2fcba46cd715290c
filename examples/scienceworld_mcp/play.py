"""What this example's agents read the same way: the model and its limits, the instructions, the MCP server."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mcp.client import Client

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


@contextlib.asynccontextmanager
async def environment() -> AsyncIterator[Client]:
    """This attempt's environment as an mcp 2 Client. Imported here, not above: the adapters' agents read this
    module from an agent venv with mcp 1, which has no such client."""
    import httpx2
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client

    url, headers = mcp_server()
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        yield client
