"""A LangGraph ReAct agent whose tools come from langchain-mcp-adapters, as a team's agent already has them.

The MCP server is the one alight serves beside this attempt's gateway (`$OPENAI_BASE_URL/mcp`, the attempt's
token as the bearer); nothing here knows the game or scores it. langchain-mcp-adapters needs mcp 1.x, so this
runs from its own environment (`bash scripts/setup.sh --mcp1`):
`alight run -- .venv-mcp1/bin/python -m alight.entry examples/scienceworld_mcp/adapters/langgraph_agent.py:main`.
"""

from __future__ import annotations

import contextlib
import sys
import warnings
from pathlib import Path
from typing import Any

from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_openai import ChatOpenAI
from langgraph.errors import GraphRecursionError

import alight
import alight_langchain

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the example's folder: play.py
from play import INSTRUCTIONS, MAX_TOKENS, MAX_TURNS, MODEL, mcp_server

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # LangGraph 1.x points at langchain.agents; the prebuilt agent still works
    from langgraph.prebuilt import create_react_agent

alight_langchain.instrument()


@alight.rollout
async def main(task: dict[str, Any]) -> None:
    url, headers = mcp_server()
    client = MultiServerMCPClient({"environment": {"transport": "streamable_http", "url": url, "headers": headers}})
    tools = await client.get_tools()  # opens the game
    model = ChatOpenAI(model=MODEL, temperature=1.0, max_completion_tokens=MAX_TOKENS)
    agent = create_react_agent(model, tools, prompt=INSTRUCTIONS, name="scientist")
    with contextlib.suppress(GraphRecursionError):  # a wandering policy ends early; the environment still scores it
        await agent.ainvoke({"messages": [("user", "Play the task in the environment.")]},
                            {"recursion_limit": 2 * MAX_TURNS + 1})  # fmt: skip
