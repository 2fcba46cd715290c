"""A small calculator MCP server (mcp 2.x MCPServer) for examples and tests; `python -m alight_mcp.calculator`."""

from __future__ import annotations

import ast
import math
import operator
import re
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent

from alight_mcp.rewards import REWARD_FINAL_KEY, REWARD_META_KEY, REWARD_NAME_KEY

_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos}
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_MAX_EXPONENT = 100  # 10**10**10 would hang the server; arithmetic tasks never need more


def evaluate(expression: str) -> float:
    """Evaluate +-*/ // % ** and parentheses over numbers; anything else is a ValueError."""
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError as e:
        raise ValueError(f"cannot parse expression {expression!r}: {e.msg}; use numbers, + - * / // % ** and ()") from e
    return float(_eval(tree.body, expression))


def _eval(node: ast.AST, expression: str) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand, expression))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left, expression), _eval(node.right, expression)
        if isinstance(node.op, ast.Pow) and abs(right) > _MAX_EXPONENT:
            raise ValueError(f"exponent {right} in {expression!r} is larger than {_MAX_EXPONENT}")
        try:
            return _BINARY[type(node.op)](left, right)
        except ZeroDivisionError as e:
            raise ValueError(f"division by zero in {expression!r}") from e
    raise ValueError(
        f"unsupported element {ast.dump(node)[:60]} in {expression!r}; use numbers, + - * / // % ** and ()"
    )


def create_calculator(name: str = "calculator") -> MCPServer[Any]:
    """Build the calculator server: `calculate` evaluates arithmetic, `check_answer` scores one with a reward."""
    server: MCPServer[Any] = MCPServer(name, instructions="Arithmetic for agents: call calculate(expression).")

    @server.tool(description="Evaluate an arithmetic expression such as '(3 + 4) * 12' and return the number.")
    def calculate(expression: str) -> float:
        try:
            return evaluate(expression)
        except ValueError as e:
            raise ToolError(str(e)) from e  # a ToolError's text reaches the model, so it can fix the expression

    @server.tool(
        description="Score a final answer (its last number) against the expected one; carries an alight reward. "
        "partial_credit: a wrong number earns 0.5 / (1 + relative error) instead of 0."
    )
    def check_answer(answer: str, expected: float, partial_credit: bool = False) -> CallToolResult:
        numbers = _NUMBER.findall(answer.replace(",", ""))
        correct = bool(numbers) and math.isclose(float(numbers[-1]), expected, rel_tol=1e-6, abs_tol=1e-9)
        reward = 1.0 if correct else 0.0
        if numbers and not correct and partial_credit:
            # Closeness ranks near misses above wild guesses, so a group of rollouts differs before any is right.
            reward = 0.5 / (1.0 + abs(float(numbers[-1]) - expected) / max(abs(expected), 1.0))
        return CallToolResult(
            content=[TextContent(type="text", text="correct" if correct else f"wrong: expected {expected}")],
            _meta={REWARD_META_KEY: reward, REWARD_NAME_KEY: "correct", REWARD_FINAL_KEY: True},
        )

    return server


if __name__ == "__main__":
    create_calculator().run("stdio")
