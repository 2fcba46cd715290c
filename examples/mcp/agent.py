"""A plain OpenAI-client agent whose tools live on the MCP calculator server; `alight train examples/mcp/config.yaml`.

No agent framework: the loop below is all there is. alight_mcp turns each MCP request into a span and
the calculator's `check_answer` verdict (an `alight.reward` in its result) into the rollout's reward.
Run it alone with any OpenAI-compatible server (OPENAI_BASE_URL, OPENAI_API_KEY, AGENT_MODEL).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from openai import AsyncOpenAI

import alight
import alight_mcp

alight_mcp.instrument()

MODEL = os.environ.get("AGENT_MODEL", "policy")  # the gateway serves the policy being trained whatever the name
MAX_TOKENS = 256  # an arithmetic answer is short; a cap keeps a wandering policy from burning a rollout
CALCULATOR = StdioServerParameters(command=sys.executable, args=["-m", "alight_mcp.calculator"])
AGENT_TOOLS = {"calculate"}  # check_answer is the grader's, not the agent's
MAX_TURNS = 6


@alight.rollout
async def main(task: dict[str, Any]) -> None:
    model = AsyncOpenAI()  # OPENAI_BASE_URL / OPENAI_API_KEY: alight points them at this attempt's gateway
    async with Client(CALCULATOR) as calculator:
        listed = await calculator.list_tools()
        tools: Any = [
            {
                "type": "function",
                "function": {"name": t.name, "description": t.description or "", "parameters": t.input_schema},
            }
            for t in listed.tools
            if t.name in AGENT_TOOLS
        ]
        messages: list[Any] = [
            {"role": "system", "content": "Answer arithmetic questions with the calculate tool, then give the number."},
            {"role": "user", "content": task["question"]},
        ]
        answer = ""
        for _ in range(MAX_TURNS):
            response = await model.chat.completions.create(
                model=MODEL, messages=messages, tools=tools, max_tokens=MAX_TOKENS
            )
            message = response.choices[0].message
            messages.append(message.model_dump(exclude_none=True))
            answer = message.content or ""
            if not message.tool_calls:
                break
            for call in message.tool_calls:
                if call.type != "function":
                    continue  # custom (free-text) tools are not offered to this agent
                result = await calculator.call_tool(call.function.name, json.loads(call.function.arguments or "{}"))
                messages.append({"role": "tool", "tool_call_id": call.id, "content": alight_mcp.result_text(result)})
        await calculator.call_tool(
            "check_answer", {"answer": answer, "expected": float(task["answer"]), "partial_credit": True}
        )


if __name__ == "__main__":
    asyncio.run(main({"question": "What is 12 times 7, plus 5?", "answer": 89}))
