"""TextWorldExpress (PyPI `textworld-express`, unmodified) as MCP tools: one game JVM per attempt.

Config: `environment: {mcp: textworld_express, task: coin, params: "numLocations=3", max_steps: 30}`; `task` is
one of its games (coin, cookingworld, twc, mapreader, arithmetic, sorting, simonsays, peckingorder). The tasks
are the game's seeds: its train seeds for training, its dev seeds for validation (disjoint by the package's
construction, and checked by the task source). The reward is the game's own normalised score, clamped to [0, 1].
"""

from __future__ import annotations

from typing import Any

from alight_environments.mcp.game import StepLimitedGame, shuffled_splits
from alight_environments.mcp.host import serve_environment
from alight_environments.mcp.jvm import stop

INSTALL = (
    "pip install 'alight-environments[textworld-express]' and a Java runtime (bash scripts/setup.sh --scienceworld)"
)
SPLITS = {"train": ("train", "getValidSeedsTrain"), "validation": ("dev", "getValidSeedsDev")}


def simulator(step_limit: int) -> Any:
    try:
        from textworld_express import TextWorldExpressEnv
    except ImportError as exc:
        raise RuntimeError(f"the textworld_express environment needs the package ({exc}): {INSTALL}") from exc
    return TextWorldExpressEnv(envStepLimit=step_limit)


class TextWorldExpressGame(StepLimitedGame):
    lists_actions = True

    def __init__(self, task: dict[str, Any], max_steps: int) -> None:
        self.max_steps, self.steps, self.done = max_steps, 0, False
        self.env = simulator(max_steps + 1)
        self.process_id: int | None = self.env._gateway.java_process.pid
        try:
            self.observation, self.infos = self.env.reset(
                seed=int(task["seed"]), gameFold=str(task["fold"]), gameName=str(task["game"]),
                gameParams=str(task.get("params", "")),
            )  # fmt: skip
        except BaseException:
            self.close()
            raise

    def observe(self) -> str:
        return f"{self.infos['taskDescription']}\n\n{self.observation}"

    def step(self, action: str) -> tuple[str, bool]:
        self.observation, _, done, self.infos = self.env.step(action)
        return self.observation, bool(done)

    def valid_actions(self) -> list[str]:
        return [str(a) for a in self.infos["validActions"]]

    def score(self) -> float:
        return max(0.0, min(float(self.infos["score"]), 1.0))

    def close(self) -> None:
        stop(self.env)


class TextWorldExpress:
    name = "textworld_express"

    def splits(self, spec: dict[str, Any], seed: int) -> tuple[list[Any], list[Any]]:
        """The `alight.task_sources` face: the game's train seeds and its dev seeds, each in a seeded shuffle, cut
        to `train` / `validation` rows where those are counts (0: all)."""
        options = {"task": spec.get("task"), **spec.get("config", {})}
        game, params = str(options.get("task") or "coin"), str(options.get("params", ""))
        env = simulator(1)
        try:
            env.reset(seed=0, gameFold="train", gameName=game, gameParams=params)
            split = {part: [{"game": game, "seed": s, "fold": fold, "params": params} for s in getattr(env, method)()]
                     for part, (fold, method) in SPLITS.items()}  # fmt: skip
        finally:
            stop(env)
        return shuffled_splits(split, spec, seed)

    def open(self, task: dict[str, Any], options: dict[str, Any]) -> TextWorldExpressGame:
        return TextWorldExpressGame(task, int(options.get("max_steps", 30)))


install = serve_environment(TextWorldExpress)
