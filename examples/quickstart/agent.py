"""Quickstart agent: a calculator agent on the plain OpenAI client, with one tool it must call.

It is an ordinary agent: `python agent.py "What is 12 plus 30?"` runs it against any
OpenAI-compatible server (OPENAI_BASE_URL). Under `alight train`, `@alight.rollout` gives it
its task and records the returned number as the reward: 1.0 for a final reply of exactly
`ANSWER: <the right number>`, else 0.
"""

from __future__ import annotations

import ast
import json
import operator
import re
import sys
from typing import Any

from openai import OpenAI

import alight

MODEL = "policy"  # the gateway maps any name onto the policy being trained
MAX_TURNS = 3
SYSTEM = "You are a calculator agent. Call the calculator tool, then reply with only: ANSWER: <number>"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "calculator",
            "description": "Evaluate an arithmetic expression with + - * and parentheses.",
            "parameters": {
                "type": "object",
                "properties": {"expression": {"type": "string"}},
                "required": ["expression"],
            },
        },
    }
]
# One worked example in the conversation: small models follow a shown format far better than a described one.
EXAMPLE = [
    {"role": "user", "content": "What is 12 plus 30?"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "call_0",
                "type": "function",
                "function": {"name": "calculator", "arguments": '{"expression": "12 + 30"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_0", "content": "42"},
    {"role": "assistant", "content": "ANSWER: 42"},
]
ANSWER = re.compile(r"^\s*ANSWER:\s*(-?\d+)\s*$")
_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul}


def calculator(expression: str) -> str:
    """The tool: integer arithmetic, nothing else (no eval)."""

    def value(node: ast.AST) -> int:
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](value(node.left), value(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -value(node.operand)
        raise ValueError(f"unsupported expression: {expression!r}")

    try:
        return str(value(ast.parse(expression, mode="eval").body))
    except (SyntaxError, ValueError, RecursionError) as exc:
        return f"error: {exc}"


def solve(question: str, client: OpenAI) -> str:
    """Run the tool loop; returns the model's final reply text."""
    messages: list[Any] = [{"role": "system", "content": SYSTEM}, *EXAMPLE, {"role": "user", "content": question}]
    reply = ""
    for _ in range(MAX_TURNS):
        response = client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS, max_tokens=40)
        message = response.choices[0].message
        reply = message.content or ""
        if not message.tool_calls:
            return reply
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            try:
                expression = json.loads(call.function.arguments).get("expression", "")
            except (json.JSONDecodeError, AttributeError):
                expression = ""
            messages.append({"role": "tool", "tool_call_id": call.id, "content": calculator(str(expression))})
    return reply


def score(reply: str, answer: int) -> float:
    match = ANSWER.match(reply)
    return 1.0 if match and int(match.group(1)) == answer else 0.0


@alight.rollout
def main(task: dict[str, Any]) -> float:
    reply = solve(task["question"], OpenAI(max_retries=8))
    return score(reply, int(task["answer"]))


if __name__ == "__main__":
    print(solve(" ".join(sys.argv[1:]) or "What is 12 plus 30?", OpenAI()))
