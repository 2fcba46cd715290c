"""An AutoGen AssistantAgent on autogen-ext's McpWorkbench, as a team's agent already has it.

The MCP server is the one alight serves beside this attempt's gateway (`$OPENAI_BASE_URL/mcp`, the attempt's
token as the bearer); nothing here knows the game or scores it. autogen-ext 0.7.5's MCP tools need mcp 1.x, so
this runs from its own environment (`bash scripts/setup.sh --mcp1`):
`alight run -- .venv-mcp1/bin/python -m alight.entry examples/scienceworld_mcp/adapters/autogen_agent.py:main`.
"""

from __future__ import annotations

import os
from typing import Any

from autogen_agentchat.agents import AssistantAgent
from autogen_ext.tools.mcp import McpWorkbench, StreamableHttpServerParams

import alight
import alight_autogen

alight_autogen.instrument()

MODEL = os.environ.get("AGENT_MODEL", "policy")  # the gateway serves the policy being trained whatever the name
INSTRUCTIONS = (
    "You play a text simulation through tools. Call observe to read the task, then act with one command at a "
    "time (valid_actions lists the commands that work now). Stop when the task is done."
)


@alight.rollout
async def main(task: dict[str, Any]) -> None:
    url = os.environ["OPENAI_BASE_URL"].rstrip("/") + "/mcp"
    headers = {"Authorization": f"Bearer {os.environ['OPENAI_API_KEY']}"}
    # Its first tools/list starts the game (a JVM: seconds on a busy machine), hence the long timeouts.
    params = StreamableHttpServerParams(url=url, headers=headers, timeout=120, sse_read_timeout=300)
    async with McpWorkbench(params) as environment:
        agent = AssistantAgent(
            "scientist",
            model_client=alight_autogen.gateway_model_client(MODEL, max_tokens=64),
            workbench=environment,
            system_message=INSTRUCTIONS,
            max_tool_iterations=12,
        )
        await agent.run(task="Play the task in the environment.")
