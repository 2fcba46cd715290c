"""The two-role example (examples/two_roles): its tasks, each role's reward against scripted policies, and a run
of its config with two policies on the tiny model, every call routed to its role's policy by agent name."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from agents import set_tracing_disabled
from openai import AsyncOpenAI

from alight.api_models import RolloutQuery
from alight.schemas import Mode
from alight_server.policies.routing import policy_of
from alight_server.stacks.opening import TrainingStacks
from alight_server.stacks.run_store import open_run_store
from alight_server.trainer.config.run import load_config
from alight_server.trainer.run.loop import TrainingRun
from alight_server.trajectories.join import build_trajectory
from tests.examples.example_modules import EXAMPLES, load
from tests.examples.scripted_policy import scripted_policy

agent = load("two_roles", "agent")
tasks = load("two_roles", "tasks")
TASKS = tasks.make_tasks("val", 6)
Planner = Callable[[dict[str, Any]], str]  # the task -> the planner's reply
Solver = Callable[[str, str | None], str]  # (the expression it was given, the calculator's result or None) -> reply


def right_planner(task: dict[str, Any]) -> str:
    return f"EXPRESSION: {task['expression']}"


def right_solver(expression: str, result: str | None) -> str:
    return f"CALL calculator({expression})" if result is None else f"ANSWER: {result}"


@pytest.fixture
def play() -> Iterator[Callable[[Planner, Solver], list[dict[str, float]]]]:
    """Runs agent.run_roles on TASKS with the Agents SDK against scripted roles: each task's rewards."""
    set_tracing_disabled(True)

    def run(planner: Planner, solver: Solver) -> list[dict[str, float]]:
        by_question = {t["question"]: t for t in TASKS}

        def reply(messages: list[dict[str, Any]]) -> str:
            last = messages[-1]["content"]
            if "EXPRESSION" in messages[0]["content"]:
                return planner(by_question[last])
            given = re.fullmatch(r"Compute (.*)", last)
            result = re.fullmatch(r"calculator result: (.*)", last)
            expression = given.group(1) if given else re.search(r"calculator\((.*)\)", messages[-2]["content"])[1]  # type: ignore[index]
            return solver(expression, None if result is None else result.group(1))

        with scripted_policy(reply) as (url, _):
            client = AsyncOpenAI(base_url=url, api_key="scripted")

            async def all_tasks() -> list[dict[str, float]]:
                return [await agent.run_roles(t["question"], t["answer"], t["expression"], client) for t in TASKS]

            return asyncio.run(all_tasks())

    yield run
    set_tracing_disabled(False)


def test_tasks_are_seeded_right_and_the_splits_share_no_names_items_or_problems() -> None:
    assert tasks.make_tasks("train", 50) == tasks.make_tasks("train", 50)
    train, val = tasks.make_tasks("train", 400), tasks.make_tasks("val", 64)
    assert all(agent.evaluate(t["expression"]) == t["answer"] for t in train + val)
    words = lambda split: {w for t in split for w in re.findall(r"[A-Za-z]+", t["question"])}  # noqa: E731
    assert not words(val) & (set(tasks.TRAIN_NAMES) | set(tasks.TRAIN_ITEMS))
    assert not {t["question"] for t in train} & {t["question"] for t in val}


def test_the_scripted_oracle_earns_every_reward(play) -> None:
    assert play(right_planner, right_solver) == [{"planner": 1.0, "solver": 1.0, "final": 1.0}] * len(TASKS)


def test_a_wrong_plan_costs_the_planner_and_the_final_reward_but_not_a_solver_that_computes_it(play) -> None:
    def wrong_planner(task: dict[str, Any]) -> str:
        return f"EXPRESSION: {task['expression'].translate(str.maketrans('+-*', '-++'))}"  # another operator

    assert play(wrong_planner, right_solver) == [{"planner": 0.0, "solver": 1.0, "final": 0.0}] * len(TASKS)


@pytest.mark.parametrize(
    "answer",
    [lambda r: f"The answer is {r}", lambda r: f"ANSWER: {int(r) + 1}", lambda r: f"ANSWER: {r}\nANSWER: 0"],
    ids=["off-format", "wrong number", "two lines"],
)
def test_a_solver_off_format_or_wrong_earns_nothing(play, answer: Callable[[str], str]) -> None:
    def solver(expression: str, result: str | None) -> str:
        return f"CALL calculator({expression})" if result is None else answer(result)

    assert play(right_planner, solver) == [{"planner": 1.0, "solver": 0.0, "final": 0.0}] * len(TASKS)


def test_without_a_plan_the_solver_practises_on_the_tasks_expression_and_the_chain_fails(play) -> None:
    given: list[str] = []

    def solver(expression: str, result: str | None) -> str:
        given.append(expression)
        return right_solver(expression, result)

    assert play(lambda task: "I think it is 5", solver) == [{"planner": 0.0, "solver": 1.0, "final": 0.0}] * 6
    assert given[::2] == [t["expression"] for t in TASKS]


@pytest.mark.parametrize(
    "reply",
    [
        "EXPRESSION: 12 * 30 + 1",
        "EXPRESSION: 12*30",
        "EXPRESSION: 12 * 30 = 360 pens",
        "EXPRESSION: 12 / 30",
        "12 * 30",
    ],
)
def test_the_planner_is_read_from_its_first_line_only_as_two_numbers_and_an_operator(reply: str) -> None:
    expected = {"EXPRESSION: 12*30": "12*30", "EXPRESSION: 12 * 30 = 360 pens": "12 * 30"}.get(reply)
    assert agent.parse_expression(reply) == expected


@pytest.mark.parametrize(
    "expression",
    ["__import__('os').system('id')", "2 ** 100", "1 / 0", "9" * 80, "(" * 500 + "1" + ")" * 500, "1.5 * 2"],
)
def test_the_calculator_computes_only_integer_arithmetic(expression: str) -> None:
    assert agent.calculator(expression).startswith("error: ")


def test_the_config_trains_two_policies_on_the_tiny_model_routing_each_call_by_its_agent(tmp_path: Path) -> None:
    overrides = {"model": "tiny", "steps": 1, "tasks_per_step": 2, "group_size": 2, "output_dir": str(tmp_path),
                 "validation.max_tasks": 1, "validation.samples_per_task": 1, "controller.concurrency": 4,
                 "review.audit_share": 0.0}  # fmt: skip
    config = load_config(EXAMPLES / "two_roles" / "config.yaml", overrides)
    result = TrainingRun(config, stacks=TrainingStacks(), show_progress=False).run()
    (step,) = [row for row in result.history if row["step"] == 1]
    for role in ("planner", "solver"):
        assert step[f"policy/{role}/samples/rows"] > 0, step
    store = open_run_store(tmp_path)
    try:
        rollouts = store.list_rollouts(RolloutQuery(mode=Mode.TRAIN, limit=10))
        assert len(rollouts) == 4
        for rollout in rollouts:
            trajectory = build_trajectory(store, rollout.id)
            assert trajectory.calls[0].agent_name == "planner"
            assert all(policy_of(c.call.flags) == c.agent_name for c in trajectory.calls)
            assert {r.name for r in trajectory.rewards} == {"planner", "solver", None}
    finally:
        store.close()
