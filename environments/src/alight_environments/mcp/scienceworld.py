"""ScienceWorld (AllenAI, PyPI `scienceworld`, unmodified) as MCP tools: one simulator JVM per attempt.

Config: `environment: {mcp: scienceworld, task: find-non-living-thing, simplification: easy, max_steps: 30}`;
`task` may be a list. The tasks are the environment's variations: its own train split for training, its dev
split for validation (disjoint by ScienceWorld's construction, and checked). The reward is the simulator's score
/ 100 (a failed task, which ScienceWorld scores -100, is 0).
"""

from __future__ import annotations

from typing import Any

from alight_environments.mcp.game import StepLimitedGame, shuffled_splits
from alight_environments.mcp.host import serve_environment
from alight_environments.mcp.jvm import stop

INSTALL = "bash scripts/setup.sh --scienceworld (pip install 'alight-environments[scienceworld]' and a Java runtime)"
SPLITS = {"train": "get_variations_train", "validation": "get_variations_dev"}


def simulator(step_limit: int) -> Any:
    try:
        from scienceworld import ScienceWorldEnv
    except ImportError as exc:
        raise RuntimeError(f"the scienceworld environment needs the simulator ({exc}): {INSTALL}") from exc
    return ScienceWorldEnv("", envStepLimit=step_limit)


def task_names(options: dict[str, Any]) -> list[str]:
    names = options.get("task") or "find-non-living-thing"
    return [names] if isinstance(names, str) else list(names)


class ScienceWorldGame(StepLimitedGame):
    lists_actions = True

    def __init__(self, task: dict[str, Any], max_steps: int) -> None:
        self.max_steps, self.steps, self.done = max_steps, 0, False
        self.env = simulator(max_steps + 1)
        self.process_id: int | None = self.env._gateway.java_process.pid
        try:
            self.env.load(str(task["task_name"]), int(task["variation"]), str(task.get("simplification", "easy")))
            self.observation, info = self.env.reset()
        except BaseException:
            self.close()
            raise
        self.raw_score = int(info["score"])

    def observe(self) -> str:
        return f"{self.env.get_task_description()}\n\n{self.observation}"

    def step(self, action: str) -> tuple[str, bool]:
        self.observation, _, done, info = self.env.step(action)
        self.raw_score = int(info["score"])
        return self.observation, bool(done)

    def valid_actions(self) -> list[str]:
        return [str(a) for a in self.env.get_valid_action_object_combinations()]

    def score(self) -> float:
        return max(0, min(self.raw_score, 100)) / 100

    def close(self) -> None:
        stop(self.env)


class ScienceWorld:
    name = "scienceworld"

    def splits(self, spec: dict[str, Any], seed: int) -> tuple[list[Any], list[Any]]:
        """The `alight.task_sources` face: ScienceWorld's train variations and its dev ones for the configured
        tasks, each in a seeded shuffle, cut to `train` / `validation` rows where those are counts (0: all)."""
        options = {"task": spec.get("task"), **spec.get("config", {})}
        simplification = str(options.get("simplification", "easy"))
        env = simulator(1)
        try:
            split: dict[str, list[dict[str, Any]]] = {"train": [], "validation": []}
            for name in task_names(options):
                env.load(name, 0, simplification)
                for part, method in SPLITS.items():
                    split[part] += [{"task_name": name, "variation": v, "simplification": simplification}
                                    for v in getattr(env, method)()]  # fmt: skip
        finally:
            stop(env)
        return shuffled_splits(split, spec, seed)

    def open(self, task: dict[str, Any], options: dict[str, Any]) -> ScienceWorldGame:
        return ScienceWorldGame(task, int(options.get("max_steps", 30)))


install = serve_environment(ScienceWorld)
