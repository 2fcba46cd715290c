"""An AutoGen AssistantAgent on autogen-ext's McpWorkbench, as a team's agent already has it.

The MCP server is the one alight serves beside this attempt's gateway (`$OPENAI_BASE_URL/mcp`, the attempt's
token as the bearer); nothing here knows the game or scores it. autogen-ext 0.7.5's MCP tools need mcp 1.x, so
this runs from its own environment (`bash scripts/setup.sh --mcp1`):
`alight run -- .venv-mcp1/bin/python -m alight.entry examples/scienceworld_mcp/adapters/autogen_agent.py:main`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from autogen_agentchat.agents import AssistantAgent
from autogen_ext.tools.mcp import McpWorkbench, StreamableHttpServerParams

import alight
import alight_autogen

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the example's folder: play.py
from play import INSTRUCTIONS, MAX_TOKENS, MAX_TURNS, MODEL, mcp_server

alight_autogen.instrument()


@alight.rollout
async def main(task: dict[str, Any]) -> None:
    url, headers = mcp_server()
    # Its first tools/list starts the game (a JVM: seconds on a busy machine), hence the long timeouts.
    params = StreamableHttpServerParams(url=url, headers=headers, timeout=120, sse_read_timeout=300)
    async with McpWorkbench(params) as environment:
        agent = AssistantAgent(
            "scientist",
            model_client=alight_autogen.gateway_model_client(MODEL, max_tokens=MAX_TOKENS),
            workbench=environment,
            system_message=INSTRUCTIONS,
            max_tool_iterations=MAX_TURNS,
        )
        await agent.run(task="Play the task in the environment.")
