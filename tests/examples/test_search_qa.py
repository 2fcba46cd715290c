"""The search example: its worlds and splits, its tool, its reward against scripted agents, and training on it.

The scripted agents are policies behind a real OpenAI-compatible endpoint on loopback, driving the example's own
agent loop (`solve`) and its real BM25 index: the oracle reads each search result to find the next name, as a
model would have to.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from example_modules import load
from openai import OpenAI
from scripted_policy import scripted_policy

from tests.examples.tiny_step import train_one_tiny_step

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "search_qa"
agent = load("search_qa", "agent")
world = load("search_qa", "world")

FIRST_QUERY = {"founder": "who founded {}", "employer": "{} works for", "founded": "{} founded"}
SECOND_QUERY = {"born_in": "{} born", "based_in": "{} based", "founder": "who founded {}"}
# What a passage says, for each relation: the name after (or before) the entity is the next hop.
READS = {
    "founder": "{} was founded by (.+)\\.",
    "employer": "{} works for (.+)\\.",
    "founded": "(.+) was founded by {}\\.",
    "born_in": "{} was born in (.+)\\.",
    "based_in": "{} is based in (.+)\\.",
}


@functools.cache
def read_tasks(name: str) -> list[dict[str, str]]:
    return [json.loads(line) for line in (EXAMPLE / f"tasks_{name}.jsonl").read_text().splitlines()]


def template_of(task: dict[str, str]) -> tuple[str, str, str]:
    return next(t for t in world.TEMPLATES if t[0].format(entity=task["entity"]) == task["question"])


def own_turns(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation after the agent's worked example: the question, then the policy's turns and results."""
    return messages[1 + len(agent.EXAMPLE) :]


def oracle(messages: list[dict[str, Any]]) -> str:
    """Searches for the question's entity, reads the bridge off the result, searches for it, reads the answer."""
    turns = own_turns(messages)
    task = next(t for t in read_tasks("val") + read_tasks("train") if t["question"] == turns[0]["content"])
    _, first, second = template_of(task)
    if len(turns) == 1:
        return "SEARCH: " + FIRST_QUERY[first].format(task["entity"])
    found = re.search(READS[first].format(re.escape(task["entity"])), turns[-1]["content"])
    if len(turns) == 3 and found:
        return "SEARCH: " + SECOND_QUERY[second].format(found.group(1))
    bridge = re.search(READS[first].format(re.escape(task["entity"])), turns[2]["content"])
    assert bridge, turns
    answer = re.search(READS[second].format(re.escape(bridge.group(1))), turns[-1]["content"])
    return f"ANSWER: {answer.group(1) if answer else 'not found'}"


def play(policy: Callable[[list[dict[str, Any]]], str], *tasks: dict[str, str]) -> list[float]:
    """The example's agent loop and reward on each task, its model replaced by `policy` (one server for all)."""
    with scripted_policy(policy) as (url, _):
        client = OpenAI(base_url=url, api_key="unused")
        replies = [agent.solve(task["question"], client, agent.corpus_search()) for task in tasks]
    return [agent.score(reply, task["answer"]) for reply, task in zip(replies, tasks, strict=True)]


def scripted(*replies: str) -> Callable[[list[dict[str, Any]]], str]:
    """A policy saying `replies` in turn (the last one again past the end), whatever the tool answered."""
    return lambda messages: replies[min(len(own_turns(messages)) // 2, len(replies) - 1)]


def test_the_committed_files_are_what_the_generator_writes_from_its_seed() -> None:
    splits = world.make_splits(world.SEED)
    assert read_tasks("train") == splits.train and read_tasks("val") == splits.val
    corpus = [json.loads(line)["text"] for line in (EXAMPLE / "corpus.jsonl").read_text().splitlines()]
    assert corpus == splits.corpus


def test_the_held_out_world_shares_no_name_with_the_train_world() -> None:
    splits = world.make_splits(world.SEED)

    def words(w: Any) -> set[str]:  # a world.World
        names = [*w.people, *(c.rsplit(" ", 1)[0] for c in w.companies), *w.towns]
        return {part for name in names for part in name.split()}

    assert not words(splits.train_world) & words(splits.val_world)
    train_names = {t[k] for t in splits.train for k in ("entity", "bridge", "answer")}
    assert not train_names & {t[k] for t in splits.val for k in ("entity", "bridge", "answer")}
    assert not {t["question"] for t in splits.train} & {t["question"] for t in splits.val}


def test_every_question_needs_two_different_facts() -> None:
    for task in read_tasks("train") + read_tasks("val"):
        assert task["entity"] != task["bridge"] != task["answer"], task
        assert task["bridge"] not in task["question"] and task["answer"] not in task["question"], task


def test_the_oracle_reading_the_search_results_gets_reward_1_on_every_held_out_task() -> None:
    rewards = play(oracle, *read_tasks("val"))
    assert rewards == [1.0] * len(read_tasks("val"))


def test_the_reward_separates_a_correct_from_an_incorrect_scripted_agent() -> None:
    task = read_tasks("val")[0]
    _, first, second = template_of(task)
    search_1 = "SEARCH: " + FIRST_QUERY[first].format(task["entity"])
    search_2 = "SEARCH: " + SECOND_QUERY[second].format(task["bridge"])
    assert play(scripted(search_1, search_2, f"ANSWER: {task['answer']}"), task) == [1.0]
    assert play(scripted(search_1, search_2, f"answer: {task['answer'].upper()}."), task) == [0.0]  # not the format
    assert play(scripted(search_1, f"ANSWER: {task['bridge']}"), task) == [0.0]  # stopped after one hop
    other = next(t for t in read_tasks("train") if template_of(t)[2] == second)
    assert play(scripted(f"ANSWER: {other['answer']}"), task) == [0.0]  # a guess, no search
    towns = " ".join(sorted({t["answer"] for t in read_tasks("val")}))
    assert play(scripted(search_1, search_2, f"ANSWER: {towns}"), task) == [0.0]  # every name at once


@pytest.mark.parametrize("query", ["", "the of and", "!!!", "x" * 100_000, "Ωμέγα 名前 \x00", "SEARCH: SEARCH:"])
def test_the_search_tool_answers_any_query_the_model_writes(query: str) -> None:
    found = agent.corpus_search()(query)
    assert isinstance(found, list) and len(found) <= agent.TOP_K


# Opt-in: the same text-tool loop as test_word_problems.py's default tiny-model step (pytest -m examples_train).
@pytest.mark.slow
@pytest.mark.examples_train
@pytest.mark.timeout(600)
def test_one_training_step_runs_on_the_tiny_model(tmp_path: Path) -> None:
    step = train_one_tiny_step(EXAMPLE, tmp_path)
    assert step["samples/rows"] >= 4 and step["perf/generated_tokens"] > 0, step
