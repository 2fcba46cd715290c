"""The interface a peer environment implements to be served as MCP tools: a game per attempt, its tasks split.

An environment is one module away: implement `Environment` (its tasks, and `open` one of them as a `Game`),
then register `install = serve_environment(Coin)` under the `alight.environments` entry points and `Coin`
under `alight.task_sources` (the run's tasks, evaluation/sources.py in the server):

    class Coin:
        name = "coin"
        def splits(self, spec, seed):            # also its `alight.task_sources` entry: (train, validation)
            return [{"seed": s} for s in range(90)], [{"seed": s} for s in range(90, 100)]
        def open(self, task, options):
            return CoinGame(task["seed"])         # observe / act / valid_actions / score / close

The game's score is the reward; the agent reaches the game only through the tools below, never the score's store.
"""

from __future__ import annotations

import random
from typing import Any, Protocol

from alight_environments.mcp.protocol import Tool, ToolRefused

MAX_ACTION_CHARS = 300  # longer than any text game's command; the model's text is never trusted to be short


class Game(Protocol):
    """One episode, opened for one attempt and closed when it ends."""

    process_id: int | None  # the process the game runs in (a JVM), for the check that none outlives its attempt
    lists_actions: bool  # whether valid_actions() has the environment's own list (a `valid_actions` tool)

    def observe(self) -> str: ...
    def act(self, action: str) -> str: ...
    def valid_actions(self) -> list[str]: ...
    def score(self) -> float: ...  # the environment's own score, as a reward in [0, 1]
    def close(self) -> None: ...


class Environment(Protocol):
    name: str

    def splits(self, spec: dict[str, Any], seed: int) -> tuple[list[Any], list[Any]]: ...  # disjoint
    def open(self, task: dict[str, Any], options: dict[str, Any]) -> Game: ...


class StepLimitedGame:
    """What the Java text games share: a step budget, the episode's end, and a refused command as a tool error
    (py4j raises for text the game cannot parse; the episode goes on). A game implements `step`."""

    max_steps: int
    steps: int
    done: bool

    def act(self, action: str) -> str:
        if self.done or self.steps >= self.max_steps:
            raise ToolRefused(f"the episode is over after {self.steps} steps; its score is final")
        try:
            observation, done = self.step(action)
        except Exception as exc:
            raise ToolRefused(f"the environment could not take {action!r}: {type(exc).__name__}") from exc
        self.steps, self.done = self.steps + 1, done
        return observation

    def step(self, action: str) -> tuple[str, bool]:
        """One command in the environment: (observation, whether the episode ended)."""
        raise NotImplementedError


def game_tools(game: Game) -> dict[str, Tool]:
    """The MCP tools of one game: observe, act, valid_actions (where the game has the list), score."""

    def act(arguments: dict[str, Any]) -> str:
        action = arguments["action"]
        if not isinstance(action, str) or not action.strip() or len(action) > MAX_ACTION_CHARS:
            raise ToolRefused(f"action must be one line of text up to {MAX_ACTION_CHARS} characters")
        return game.act(" ".join(action.split()))

    def valid(_: dict[str, Any]) -> str:
        return "\n".join(game.valid_actions())

    tools = [
        Tool("observe", "What the environment shows now: the task and the current observation.", lambda _: game.observe()),
        Tool("act", "Take one action (a text command) and get the environment's answer.", act,
             {"action": {"type": "string", "description": "one command, e.g. 'look around'"}}),
        Tool("score", "The environment's score so far, from 0 to 1.", lambda _: f"{game.score():.4g}"),
    ]  # fmt: skip
    if game.lists_actions:
        tools.insert(2, Tool("valid_actions", "The actions the environment accepts now, one a line.", valid))
    return {tool.name: tool for tool in tools}


def shuffled_splits(split: dict[str, list[Any]], spec: dict[str, Any], seed: int) -> tuple[list[Any], list[Any]]:
    """An environment's own train and validation tasks, each in a seeded shuffle, cut to `train` / `validation`
    rows where the spec gives those as counts (0: all)."""
    for part, rows in split.items():
        random.Random(f"{seed}-{part}").shuffle(rows)
        count = spec.get(part)
        split[part] = rows[:count] if isinstance(count, int) and count > 0 else rows
    return split["train"], split["validation"]
