"""An AutoGen AssistantAgent that calculates through the MCP calculator server; `alight train examples/autogen/config.yaml`.

The agent's tool talks to `python -m alight_mcp.calculator` over stdio; the calculator's `check_answer`
tool returns its verdict with an `alight.reward` in the result, which alight_mcp records as a reward.
Run it alone with any OpenAI-compatible server (OPENAI_BASE_URL, OPENAI_API_KEY, AGENT_MODEL).
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from autogen_agentchat.agents import AssistantAgent
from autogen_core.tools import FunctionTool
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

import alight
import alight_autogen
import alight_mcp

alight_autogen.instrument()
alight_mcp.instrument()

MODEL = os.environ.get("AGENT_MODEL", "policy")  # the gateway serves the policy being trained whatever the name
MAX_TOKENS = 256  # an arithmetic answer is short; a cap keeps a wandering policy from burning a rollout
CALCULATOR = StdioServerParameters(command=sys.executable, args=["-m", "alight_mcp.calculator"])


@alight.rollout
async def main(task: dict[str, Any]) -> None:
    async with Client(CALCULATOR) as calculator:

        async def calculate(expression: str) -> str:
            """Evaluate an arithmetic expression such as '(3 + 4) * 12'."""
            result = await calculator.call_tool("calculate", {"expression": expression})
            return alight_mcp.result_text(result)

        agent = AssistantAgent(
            "calculator",
            model_client=alight_autogen.gateway_model_client(MODEL, max_tokens=MAX_TOKENS),
            tools=[FunctionTool(calculate, description="Evaluate an arithmetic expression.")],
            system_message="Answer arithmetic questions with the calculate tool, then give the final number.",
            reflect_on_tool_use=True,
        )
        result = await agent.run(task=task["question"])
        # The reward comes from the MCP server: check_answer's result carries `alight.reward`.
        answer = result.messages[-1].to_text()
        await calculator.call_tool(
            "check_answer", {"answer": answer, "expected": float(task["answer"]), "partial_credit": True}
        )


if __name__ == "__main__":
    asyncio.run(main({"question": "What is 12 times 7, plus 5?", "answer": 89}))
