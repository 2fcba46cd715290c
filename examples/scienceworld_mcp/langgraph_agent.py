"""A LangGraph ReAct agent that plays ScienceWorld through MCP tools; the environment's score is its reward.

The same agent as agent.py on LangGraph's prebuilt ReAct agent: it connects to the MCP server alight serves beside
this attempt's gateway (`$OPENAI_BASE_URL/mcp`, the attempt's token as the bearer) and hands its tools to the
agent as LangChain tools. `langchain-mcp-adapters` would do that conversion, but 0.3.2 pins `mcp<2` and 0.3.0
imports names mcp 2 no longer has, and alight's packages need mcp 2, so `langchain_tools` below is the few lines
it would be. Nothing here knows the game, and nothing scores: the server posts the environment's score when the
attempt ends.
`alight train examples/scienceworld_mcp/config_langgraph.yaml`.
"""

from __future__ import annotations

import contextlib
import warnings
from typing import Any

import play
from langchain_core.tools import StructuredTool, ToolException
from langchain_openai import ChatOpenAI
from langgraph.errors import GraphRecursionError
from mcp.client import Client
from play import INSTRUCTIONS, MAX_TOKENS, MAX_TURNS, MODEL

import alight
import alight_langchain

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # LangGraph 1.x points at langchain.agents; the prebuilt agent still works
    from langgraph.prebuilt import create_react_agent

alight_langchain.instrument()


def langchain_tools(environment: Client, listed: list[Any]) -> list[StructuredTool]:
    """The MCP server's tools as LangChain tools; a tool's error goes back to the model as its result."""

    def convert(tool: Any) -> StructuredTool:
        async def call(**arguments: Any) -> str:
            result = await environment.call_tool(tool.name, arguments)
            text = "\n".join(part.text for part in result.content if part.type == "text")
            if result.is_error:
                raise ToolException(text)
            return text

        return StructuredTool(name=tool.name, description=tool.description or tool.name, args_schema=tool.input_schema,
                              coroutine=call, handle_tool_error=True)  # fmt: skip

    return [convert(tool) for tool in listed]


@alight.rollout
async def main(task: dict[str, Any]) -> None:
    async with play.environment() as environment:
        tools = langchain_tools(environment, (await environment.list_tools()).tools)  # opens the game
        # Built per rollout: ChatOpenAI reads OPENAI_BASE_URL / OPENAI_API_KEY, which alight sets per attempt.
        model = ChatOpenAI(model=MODEL, temperature=1.0, max_completion_tokens=MAX_TOKENS)
        agent = create_react_agent(model, tools, prompt=INSTRUCTIONS, name="scientist")
        # A wandering policy ends its episode early (two graph steps a turn); the environment still scores it.
        with contextlib.suppress(GraphRecursionError):
            await agent.ainvoke({"messages": [("user", "Play the task in the environment.")]},
                                {"recursion_limit": 2 * MAX_TURNS + 1})  # fmt: skip
