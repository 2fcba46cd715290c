"""The word-problem example: its generator and splits, its tool, its reward against scripted agents, and learning.

The scripted agents are policies behind a real OpenAI-compatible endpoint on loopback, driving the example's own
agent loop (`solve`) and calculator: the oracle reads each calculator result to write its next call, as a model
would have to. The learning test (opt-in: `pytest -m word_problems_learning`) is the example's own config on
SmolLM2-135M, as `recipe.sh` runs it (a warm start on the oracle's train conversations, then RL).
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from example_modules import load
from openai import OpenAI
from scripted_policy import scripted_policy

from tests.examples.tiny_step import train_one_tiny_step

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "word_problems"
agent = load("word_problems", "agent")
problems = load("word_problems", "problems")
RESULT = re.compile(r"calculator result: (-?\d+)")


@functools.cache
def read_tasks(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (EXAMPLE / f"tasks_{name}.jsonl").read_text().splitlines()]


def own_turns(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation after the agent's worked example: the question, then the policy's turns and results."""
    return messages[1 + len(agent.EXAMPLE) :]


def oracle(messages: list[dict[str, Any]]) -> str:
    """One calculator call a step, the second on the first's result as the tool gave it, then the answer."""
    turns = own_turns(messages)
    task = next(t for t in read_tasks("val") + read_tasks("train") if t["question"] == turns[0]["content"])
    template, a, b, c = task["instance"]
    first, second = problems.TEMPLATES[template].steps
    if len(turns) == 1:
        return f"CALL calculator({first.format(a=a, b=b)})"
    result = RESULT.fullmatch(turns[-1]["content"])
    assert result, turns[-1]
    if len(turns) == 3:
        return f"CALL calculator({second.format(r=result.group(1), c=c)})"
    return f"ANSWER: {result.group(1)}"


def play(policy: Callable[[list[dict[str, Any]]], str], *tasks: dict[str, Any]) -> list[float]:
    """The example's agent loop and reward on each task, its model replaced by `policy` (one server for all)."""
    with scripted_policy(policy) as (url, _):
        client = OpenAI(base_url=url, api_key="unused")
        replies = [agent.solve(task["question"], client) for task in tasks]
    return [agent.score(reply, int(task["answer"])) for reply, task in zip(replies, tasks, strict=True)]


def scripted(*replies: str) -> Callable[[list[dict[str, Any]]], str]:
    """A policy saying `replies` in turn (the last one again past the end), whatever the tool answered."""
    return lambda messages: replies[min(len(own_turns(messages)) // 2, len(replies) - 1)]


def test_the_committed_files_are_what_the_generator_writes_from_its_seed() -> None:
    train, val = problems.make_splits(0)
    assert read_tasks("train") == train and read_tasks("val") == val


def test_train_and_held_out_share_no_name_item_or_instance() -> None:
    train, val = read_tasks("train"), read_tasks("val")

    def words(tasks: list[dict[str, Any]]) -> set[str]:
        return {w.strip(".?") for t in tasks for w in t["question"].split()}

    names_and_items = set(problems.NAMES) | set(problems.ITEMS)
    assert not words(train) & words(val) & names_and_items
    assert not {tuple(t["instance"]) for t in train} & {tuple(t["instance"]) for t in val}
    assert len({tuple(t["instance"]) for t in train}) == len(train)


def test_every_answer_needs_both_steps() -> None:
    for task in read_tasks("train") + read_tasks("val"):
        template, a, b, c = task["instance"]
        assert task["answer"] == problems.TEMPLATES[template].answer(a, b, c)
        assert str(task["answer"]) not in task["question"].split()


def test_the_oracle_reading_the_calculator_gets_reward_1_on_every_held_out_problem() -> None:
    assert play(oracle, *read_tasks("val")) == [1.0] * len(read_tasks("val"))


def test_the_reward_separates_a_correct_from_an_incorrect_scripted_agent() -> None:
    task = read_tasks("val")[0]  # a * b - c
    _, a, b, c = task["instance"]
    first, answer = f"CALL calculator({a} * {b})", task["answer"]
    assert play(scripted(first, f"CALL calculator({a * b} - {c})", f"ANSWER: {answer}"), task) == [1.0]
    assert play(scripted(f"CALL calculator({a} * {b} - {c})", f"ANSWER: {answer}"), task) == [1.0]  # one call
    assert play(scripted(first, f"ANSWER: {a * b}"), task) == [0.0]  # stopped after the first step
    assert play(scripted(first, f"CALL calculator({a * b} - {c})", f"The answer is {answer}."), task) == [0.0]
    assert play(scripted(f"ANSWER: {answer + 1}"), task) == [0.0]  # a near guess


@pytest.mark.parametrize(
    "expression", ["", "1 +", "2 ** 10", "__import__('os')", "9" * 5000, "(" * 500 + "1" + ")" * 500, "1 / 0"]
)
def test_the_calculator_refuses_what_it_does_not_evaluate(expression: str) -> None:
    assert agent.calculator(expression).startswith("error:")


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_one_training_step_runs_on_the_tiny_model(tmp_path: Path) -> None:
    step = train_one_tiny_step(EXAMPLE, tmp_path)
    assert step["samples/rows"] >= 4 and step["perf/generated_tokens"] > 0, step


def test_the_oracle_traces_are_train_problems_each_solved_through_the_agents_own_loop(tmp_path: Path) -> None:
    out = tmp_path / "oracle.jsonl"
    subprocess.run([sys.executable, "oracle_traces.py", "--count", "10", "--out", str(out)], cwd=EXAMPLE, check=True)
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == 30  # two calculator calls and the answer, each one chat-completions call
    assert [line["task"] for line in lines[::3]] == read_tasks("train")[:10]
    held_out = {task["question"] for task in read_tasks("val")}
    assert not {m["content"] for line in lines for m in line["request"]["messages"]} & held_out
    for first, second, answer in zip(lines[::3], lines[1::3], lines[2::3], strict=True):
        assert second["request"]["messages"][:-2] == first["request"]["messages"]  # one conversation
        reply = answer["response"]["choices"][0]["message"]["content"]
        assert agent.score(reply, int(answer["task"]["answer"])) == 1.0


def summary(run: Path) -> dict[str, Any]:
    return json.loads((run / "summary.json").read_text())


@pytest.mark.word_problems_learning
@pytest.mark.timeout(3600)
def test_the_warm_start_recipe_lifts_the_held_out_score_beyond_two_standard_errors(tmp_path: Path) -> None:
    """recipe.sh: SFT on the oracle's train conversations, then the example's RL config from that checkpoint."""
    proc = subprocess.run(
        ["bash", str(EXAMPLE / "recipe.sh"), "0"],
        capture_output=True, text=True, timeout=3500, cwd=REPO, env={**os.environ, "WP_OUT": str(tmp_path)},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    sft, rl = summary(tmp_path / "seed0" / "sft"), summary(tmp_path / "seed0" / "rl")
    assert sft["val_before"] <= 0.3, sft  # a task the base policy mostly fails
    gain = rl["val_after"] - sft["val_before"]
    assert rl["val_after"] >= 0.6 and gain > 2 * math.hypot(sft["val_before_se"], rl["val_after_se"]), (sft, rl)
