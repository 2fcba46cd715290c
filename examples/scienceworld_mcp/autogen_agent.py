"""An AutoGen AssistantAgent that plays ScienceWorld through MCP tools; the environment's score is its reward.

The same agent as agent.py on AutoGen AgentChat: it connects to the MCP server alight serves beside this attempt's
gateway (`$OPENAI_BASE_URL/mcp`, the attempt's token as the bearer) and gives the agent its tools as a workbench.
autogen-ext's `McpWorkbench` is that workbench, but autogen-ext 0.7.5 imports names mcp 2 no longer has, and
alight's packages need mcp 2, so `EnvironmentWorkbench` below is the few lines it would be. Nothing here knows the
game, and nothing scores: the server posts the environment's score when the attempt ends.
`alight train examples/scienceworld_mcp/config_autogen.yaml`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import play
from autogen_agentchat.agents import AssistantAgent
from autogen_core import CancellationToken
from autogen_core.tools import ParametersSchema, TextResultContent, ToolResult, ToolSchema, Workbench
from mcp.client import Client
from play import INSTRUCTIONS, MAX_TOKENS, MAX_TURNS, MODEL

import alight
import alight_autogen

alight_autogen.instrument()


class EnvironmentWorkbench(Workbench):
    """An MCP server's tools as an AutoGen workbench (McpWorkbench's part this agent uses); no state of its own."""

    def __init__(self, environment: Client) -> None:
        self.environment = environment

    async def list_tools(self) -> list[ToolSchema]:
        listed = (await self.environment.list_tools()).tools
        return [
            ToolSchema(
                name=t.name, description=t.description or t.name, parameters=cast(ParametersSchema, t.input_schema)
            )
            for t in listed
        ]

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        cancellation_token: CancellationToken | None = None,
        call_id: str | None = None,
    ) -> ToolResult:
        result = await self.environment.call_tool(name, dict(arguments or {}))
        texts = [TextResultContent(content=part.text) for part in result.content if part.type == "text"]
        return ToolResult(name=name, result=list(texts), is_error=result.is_error)

    async def start(self) -> None: ...
    async def stop(self) -> None: ...
    async def reset(self) -> None: ...
    async def save_state(self) -> Mapping[str, Any]:
        return {}

    async def load_state(self, state: Mapping[str, Any]) -> None: ...


@alight.rollout
async def main(task: dict[str, Any]) -> None:
    async with play.environment() as environment:
        agent = AssistantAgent(
            "scientist",
            model_client=alight_autogen.gateway_model_client(MODEL, max_tokens=MAX_TOKENS),
            workbench=EnvironmentWorkbench(environment),
            system_message=INSTRUCTIONS,
            max_tool_iterations=MAX_TURNS,  # one tool-calling turn per iteration; the environment scores whatever
        )
        await agent.run(task="Play the task in the environment.")
