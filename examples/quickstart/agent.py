"""Quickstart agent: a calculator agent on the plain OpenAI client, with one tool it calls in text.

It is an ordinary agent: `python agent.py "What is 12 plus 30?"` runs it against any
OpenAI-compatible server (OPENAI_BASE_URL). Under `alight train`, `@alight.rollout` gives it
its task and records the returned number as the reward: 1.0 for a final reply of exactly
`ANSWER: <the right number>`, else 0.
"""

from __future__ import annotations

import ast
import operator
import os
import re
import sys
from typing import Any

from openai import OpenAI
from opentelemetry import trace

import alight
from alight import semconv

tracer = trace.get_tracer("quickstart-agent")

MODEL = "policy"  # the gateway maps any name onto the policy being trained
MAX_TURNS = 3
SYSTEM = (
    "You are a calculator agent. You have one tool, calculator. To use it, reply with exactly one line:\n"
    "CALL calculator(<expression>)\n"
    "After you get the tool result, reply with exactly one line:\n"
    "ANSWER: <number>"
)
# One worked example in the conversation: small models follow a shown format far better than a described one.
EXAMPLE = [
    {"role": "user", "content": "What is 12 plus 30?"},
    {"role": "assistant", "content": "CALL calculator(12 + 30)"},
    {"role": "user", "content": "calculator result: 42"},
    {"role": "assistant", "content": "ANSWER: 42"},
]
TOOL_CALL = re.compile(r"CALL calculator\(([^()]*(?:\([^()]*\)[^()]*)*)\)")
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

    with tracer.start_as_current_span(
        f"{semconv.OP_EXECUTE_TOOL} calculator",
        attributes={semconv.GEN_AI_OPERATION_NAME: semconv.OP_EXECUTE_TOOL, semconv.GEN_AI_TOOL_NAME: "calculator"},
    ):
        try:
            return str(value(ast.parse(expression, mode="eval").body))
        except (SyntaxError, ValueError, RecursionError) as exc:
            return f"error: {exc}"


def solve(question: str, client: OpenAI) -> str:
    """The tool loop: the model calls the calculator in text, reads the result, answers. Returns the final reply."""
    # QUICKSTART_SYSTEM (agent.env) replaces the system prompt: a prompt-only candidate for `alight eval --variant`.
    system = os.environ.get("QUICKSTART_SYSTEM", SYSTEM)
    messages: list[Any] = [{"role": "system", "content": system}, *EXAMPLE, {"role": "user", "content": question}]
    reply = ""
    for _ in range(MAX_TURNS):
        response = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=24)
        reply = response.choices[0].message.content or ""
        call = TOOL_CALL.search(reply)
        if call is None:
            return reply
        messages.append({"role": "assistant", "content": reply})
        messages.append({"role": "user", "content": f"calculator result: {calculator(call.group(1))}"})
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
