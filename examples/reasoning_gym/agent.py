"""A plain OpenAI-client agent for reasoning-gym's chain_sum, with one calculator tool it calls in text.

It asks the question, runs the calculator call the model writes, and lets the model answer in
`<answer>...</answer>`; it scores nothing. The reward is reasoning-gym's own score_answer of the model's
last answer (the text in its last answer tag), run by the server (`evaluator: {source: reasoning_gym}`,
docs/environments.md). `python agent.py "State the final answer to the following arithmetic problem: 2 + 3 ="`
runs it against any OpenAI-compatible server (OPENAI_BASE_URL).
"""

from __future__ import annotations

import ast
import operator
import re
import sys
from typing import Any

from openai import OpenAI

MAX_TURNS = 3
SYSTEM = (
    "You are a calculator agent. You have one tool, calculator. To use it, reply with exactly one line:\n"
    "CALL calculator(<expression>)\n"
    "After you get the tool result, reply with exactly one line:\n"
    "<answer>NUMBER</answer>"
)
# One worked example in the conversation: small models follow a shown format far better than a described one.
EXAMPLE = [
    {"role": "user", "content": "State the final answer to the following arithmetic problem: 12 + 30 - 5 ="},
    {"role": "assistant", "content": "CALL calculator(12 + 30 - 5)"},
    {"role": "user", "content": "calculator result: 37"},
    {"role": "assistant", "content": "<answer>37</answer>"},
]
TOOL_CALL = re.compile(r"CALL calculator\(([^()]*)\)")
_OPS = {ast.Add: operator.add, ast.Sub: operator.sub}


def calculator(expression: str) -> str:
    """The tool: integer addition and subtraction, nothing else (no eval)."""

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
    """The tool loop: the model calls the calculator in text, reads the result, answers. Returns the last reply."""
    messages: list[Any] = [{"role": "system", "content": SYSTEM}, *EXAMPLE, {"role": "user", "content": question}]
    reply = ""
    for _ in range(MAX_TURNS):
        response = client.chat.completions.create(model="policy", messages=messages, max_tokens=24)
        reply = response.choices[0].message.content or ""
        call = TOOL_CALL.search(reply)
        if call is None:
            return reply
        messages.append({"role": "assistant", "content": reply})
        messages.append({"role": "user", "content": f"calculator result: {calculator(call.group(1))}"})
    return reply


def main(task: dict[str, Any]) -> None:
    solve(task["question"], OpenAI(max_retries=8))


if __name__ == "__main__":
    print(
        solve(" ".join(sys.argv[1:]) or "State the final answer to the following arithmetic problem: 2 + 3 =", OpenAI())
    )
