"""Word-problem agent: the plain OpenAI client solves two-step arithmetic problems with a calculator it calls in text.

The quickstart's agent, one step harder: each problem chains two operations, so the model calls the calculator
once per step (`CALL calculator(23 * 47)`, then `CALL calculator(1081 - 120)`) or once on the whole expression,
and answers `ANSWER: <number>`. `python agent.py "..."` runs it against any OpenAI-compatible server
(OPENAI_BASE_URL). Under `alight train` the reward is 1.0 for exactly `ANSWER: <the right number>`, else 0.
"""

from __future__ import annotations

import ast
import operator
import re
import sys
from typing import Any

from openai import OpenAI
from opentelemetry import trace

import alight
from alight import semconv

tracer = trace.get_tracer("word-problems-agent")

MODEL = "policy"  # the gateway maps any name onto the policy being trained
MAX_TURNS = 4  # two calculator calls and the answer, and one spare
SYSTEM = (
    "You solve word problems with one tool, calculator. To use it, reply with exactly one line:\n"
    "CALL calculator(<expression>)\n"
    "Problems take two steps: call the calculator for each step. When you have the final result, reply with "
    "exactly one line:\n"
    "ANSWER: <number>"
)


def tool_message(result: str) -> str:
    """What the model reads after a call."""
    return f"calculator result: {result}"


# One worked example in the conversation: small models follow a shown format far better than a described one.
EXAMPLE = [
    {
        "role": "user",
        "content": "Kim has 14 boxes with 23 marbles in each and gives away 57 marbles. How many marbles are left? "
        "Multiply 14 by 23, then subtract 57.",
    },
    {"role": "assistant", "content": "CALL calculator(14 * 23)"},
    {"role": "user", "content": tool_message("322")},
    {"role": "assistant", "content": "CALL calculator(322 - 57)"},
    {"role": "user", "content": tool_message("265")},
    {"role": "assistant", "content": "ANSWER: 265"},
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
        attributes={
            semconv.GEN_AI_OPERATION_NAME: semconv.OP_EXECUTE_TOOL,
            semconv.GEN_AI_TOOL_NAME: "calculator",
            semconv.GEN_AI_TOOL_CALL_ARGUMENTS: expression,
        },
    ) as span:
        try:
            result = str(value(ast.parse(expression, mode="eval").body))
        except (SyntaxError, ValueError, RecursionError) as exc:
            result = f"error: {exc}"
        span.set_attribute(semconv.GEN_AI_TOOL_CALL_RESULT, result)
        return result


def solve(question: str, client: OpenAI) -> str:
    """The tool loop: the model calls the calculator in text, reads the result, answers. Returns the final reply."""
    messages: list[Any] = [{"role": "system", "content": SYSTEM}, *EXAMPLE, {"role": "user", "content": question}]
    reply = ""
    for _ in range(MAX_TURNS):
        response = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=24)
        reply = response.choices[0].message.content or ""
        call = TOOL_CALL.search(reply)
        if call is None:
            return reply
        messages.append({"role": "assistant", "content": reply})
        messages.append({"role": "user", "content": tool_message(calculator(call.group(1)))})
    return reply


def score(reply: str, answer: int) -> float:
    match = ANSWER.match(reply)
    return 1.0 if match and int(match.group(1)) == answer else 0.0


@alight.rollout
def main(task: dict[str, Any]) -> float:
    reply = solve(task["question"], OpenAI(max_retries=8))
    return score(reply, int(task["answer"]))


if __name__ == "__main__":
    print(solve(" ".join(sys.argv[1:]), OpenAI()))
