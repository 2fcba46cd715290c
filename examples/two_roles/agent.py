"""Two roles on the OpenAI Agents SDK, chained in code: a planner writes the expression, a solver computes it.

1. `planner` reads a word problem and replies `EXPRESSION: <a> <op> <b>`; its reward (name "planner") is 1 when
   that expression's value is the problem's answer.
2. `solver` gets the planner's expression (the task's own when the planner wrote none), calls its calculator
   tool and replies `ANSWER: <n>`; its reward (name "solver") is 1 when n is the value of the expression it
   was given, in exactly that format.
3. The rollout's final reward is 1 when the planner wrote an expression and the solver's answer is the
   problem's answer.

Under alight each role is its own policy (config.yaml: a LoRA adapter each), routed by agent name: the
`alight_openai_agents` integration sends the running agent's name with every model call (X-Alight-Agent).
Run it alone against any OpenAI-compatible server: `python agent.py "Ana has 12 pens and buys 30 more. ..."`.
"""

from __future__ import annotations

import ast
import asyncio
import operator
import os
import re
import sys
from typing import Any

from agents import Agent, ModelSettings, OpenAIProvider, RunConfig, Runner
from openai import AsyncOpenAI
from opentelemetry import trace

import alight
import alight_openai_agents
from alight import semconv

tracer = trace.get_tracer("two-roles-agent")

MODEL = os.environ.get("AGENT_MODEL", "policy")  # the gateway routes by agent name, whatever the model name
EXPRESSION = re.compile(r"EXPRESSION:\s*(-?\d+\s*[-+*]\s*-?\d+)")
ANSWER = re.compile(r"^\s*ANSWER:\s*(-?\d+)\s*$")
_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul}

planner = Agent(
    name="planner",
    instructions=(
        "Rewrite the word problem as one arithmetic expression with its two numbers. "
        "Reply with exactly one line: EXPRESSION: <number> <+, - or *> <number>"
    ),
    model=MODEL,
    model_settings=ModelSettings(max_tokens=24),
)
# Worked examples, one per operation: small models follow a shown format far better than a described one.
PLANNER_EXAMPLES: list[Any] = [
    {"role": "user", "content": "Lia has 124 boxes with 6 pears in each. How many pears are there in all?"},
    {"role": "assistant", "content": "EXPRESSION: 124 * 6"},
    {"role": "user", "content": "Bo had 352 nuts and ate 117 of them. How many nuts are left?"},
    {"role": "assistant", "content": "EXPRESSION: 352 - 117"},
    {"role": "user", "content": "Max has 238 keys and gets 425 more. How many keys does Max have now?"},
    {"role": "assistant", "content": "EXPRESSION: 238 + 425"},
]

# The solver's tool is called in text (`CALL calculator(...)`), as in examples/quickstart: SmolLM2-135M does not
# write JSON tool calls (probed: 0 of 16 Hermes-format calls right), but it copies a shown one-line format.
solver = Agent(
    name="solver",
    instructions=(
        "You are a calculator agent. You have one tool, calculator. To use it, reply with exactly one line:\n"
        "CALL calculator(<expression>)\n"
        "After you get the tool result, reply with exactly one line:\n"
        "ANSWER: <number>"
    ),
    model=MODEL,
    model_settings=ModelSettings(max_tokens=24),
)
SOLVER_EXAMPLES: list[Any] = [
    {"role": "user", "content": "Compute 124 * 6"},
    {"role": "assistant", "content": "CALL calculator(124 * 6)"},
    {"role": "user", "content": "calculator result: 744"},
    {"role": "assistant", "content": "ANSWER: 744"},
]
MAX_SOLVER_TURNS = 3
TOOL_CALL = re.compile(r"CALL calculator\(([^()]*)\)")


def evaluate(expression: str) -> int:
    """Integer +, - and * only (no eval); ValueError for anything else."""

    def value(node: ast.AST) -> int:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](value(node.left), value(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -value(node.operand)
        raise ValueError(f"unsupported expression: {expression!r}")

    if len(expression) > 64:
        raise ValueError("expression longer than 64 characters")
    try:
        return value(ast.parse(expression.strip(), mode="eval").body)
    except (SyntaxError, RecursionError) as exc:
        raise ValueError(f"unparsable expression: {expression!r}") from exc


def calculator(expression: str) -> str:
    """The solver's tool, as an `execute_tool calculator` span."""
    with tracer.start_as_current_span(
        f"{semconv.OP_EXECUTE_TOOL} calculator",
        attributes={semconv.GEN_AI_OPERATION_NAME: semconv.OP_EXECUTE_TOOL, semconv.GEN_AI_TOOL_NAME: "calculator"},
    ):
        try:
            return str(evaluate(expression))
        except ValueError as exc:
            return f"error: {exc}"


def parse_expression(reply: str) -> str | None:
    """The planner's expression: its first line's `EXPRESSION: a op b`; None when that line has none."""
    lines = reply.strip().splitlines()
    match = EXPRESSION.match(lines[0]) if lines else None
    if match is None:
        return None
    rest = lines[0][match.end() :].lstrip()  # "= 17" or words may follow; more of the expression may not
    return None if rest and rest[0] in "0123456789+-*/()." else match.group(1)


def parse_answer(reply: str) -> int | None:
    match = ANSWER.match(reply)
    return int(match.group(1)) if match else None


def run_config(client: AsyncOpenAI) -> RunConfig:
    """Both roles' calls through `client`, one chat call per turn (the gateway records token ids either way).

    Passed to every run rather than set as the SDK's process-wide default, which would outlive the attempt.
    """
    return RunConfig(model_provider=OpenAIProvider(openai_client=client, use_responses=False))


async def plan(question: str, config: RunConfig) -> str:
    messages: list[Any] = [*PLANNER_EXAMPLES, {"role": "user", "content": question}]
    result = await Runner.run(planner, messages, max_turns=1, run_config=config)
    return str(result.final_output)


async def solve(expression: str, config: RunConfig) -> str:
    """The solver's tool loop: it calls the calculator in text, reads the result, answers. Its final reply."""
    messages: list[Any] = [*SOLVER_EXAMPLES, {"role": "user", "content": f"Compute {expression}"}]
    reply = ""
    for _ in range(MAX_SOLVER_TURNS):
        reply = str((await Runner.run(solver, messages, max_turns=1, run_config=config)).final_output)
        call = TOOL_CALL.search(reply)
        if call is None:
            return reply
        messages += [
            {"role": "assistant", "content": reply},
            {"role": "user", "content": f"calculator result: {calculator(call.group(1))}"},
        ]
    return reply


def planner_reward(reply: str, answer: int) -> float:
    expression = parse_expression(reply)
    if expression is None:
        return 0.0
    try:
        return 1.0 if evaluate(expression) == answer else 0.0
    except ValueError:
        return 0.0


def solver_reward(reply: str, expression: str) -> float:
    given = parse_answer(reply)
    return 1.0 if given is not None and given == evaluate(expression) else 0.0


async def run_roles(question: str, answer: int, reference: str, client: AsyncOpenAI) -> dict[str, float]:
    """Both roles on one problem: each role's reward and the final one.

    When the planner wrote no expression the solver practices on the task's own (`reference`), so every
    rollout trains the solver, not only those the planner got through; the chain failed, so the final reward
    is 0 whatever the solver answers.
    """
    config = run_config(client)
    plan_reply = await plan(question, config)
    expression = parse_expression(plan_reply)
    solve_reply = await solve(expression or reference, config)
    return {
        "planner": planner_reward(plan_reply, answer),
        "solver": solver_reward(solve_reply, expression or reference),
        "final": 1.0 if expression is not None and parse_answer(solve_reply) == answer else 0.0,
    }


@alight.rollout
async def main(task: dict[str, Any]) -> float:
    # Here, not at import: with `controller.preload` the module is imported once, before any attempt's
    # environment exists, and instrument() decides on the attempt's token which trace exporter may run.
    alight_openai_agents.instrument()
    # The client is built here, under the attempt's environment (OPENAI_BASE_URL is its gateway); retries ride
    # out the 429s of a weight update of this role's policy.
    client = AsyncOpenAI(max_retries=8)
    rewards = await run_roles(task["question"], int(task["answer"]), task["expression"], client)
    alight.reward(rewards["planner"], name="planner")
    alight.reward(rewards["solver"], name="solver")
    return rewards["final"]


if __name__ == "__main__":
    question = " ".join(sys.argv[1:]) or "Ana has 12 pens and buys 30 more. How many pens does Ana have now?"
    print(asyncio.run(plan(question, run_config(AsyncOpenAI()))))
