"""An OpenAI Agents SDK agent that plays ScienceWorld through MCP tools; the environment's score is its reward.

Nothing here knows ScienceWorld: the agent connects to the MCP server alight serves beside this attempt's
gateway (`$OPENAI_BASE_URL/mcp`, the attempt's token as the bearer) and gets the tools observe / act /
valid_actions / score. The environment runs in alight's server, out of this process's reach, and its score is
posted there when the attempt ends: this agent returns nothing. `alight train examples/scienceworld_mcp/config.yaml`.
"""

from __future__ import annotations

import contextlib
from typing import Any

from agents import Agent, MaxTurnsExceeded, ModelBehaviorError, ModelSettings, Runner
from agents.mcp import MCPServerStreamableHttp
from play import INSTRUCTIONS, MAX_TOKENS, MAX_TURNS, MODEL, mcp_server

import alight
import alight_openai_agents

alight_openai_agents.instrument()


def environment() -> MCPServerStreamableHttp:
    """This attempt's environment: MCP over HTTP at its gateway, authenticated by its token."""
    url, headers = mcp_server()
    # Its first tools/list starts the game (a JVM: seconds on a busy machine), hence the long timeouts.
    params: Any = {"url": url, "headers": headers, "timeout": 120, "sse_read_timeout": 300}
    return MCPServerStreamableHttp(params=params, cache_tools_list=True, client_session_timeout_seconds=120,
                                   name="environment")  # fmt: skip


@alight.rollout
async def main(task: dict[str, Any]) -> None:
    async with environment() as tools:
        agent = Agent(
            name="scientist",
            instructions=INSTRUCTIONS,
            mcp_servers=[tools],
            model=MODEL,
            model_settings=ModelSettings(max_tokens=MAX_TOKENS),
        )
        # A wandering or malformed policy ends its episode early; the environment still scores it.
        with contextlib.suppress(MaxTurnsExceeded, ModelBehaviorError):
            await Runner.run(agent, "Play the task in the environment.", max_turns=MAX_TURNS)
