"""`alight eval CONFIG --benchmark NAME:CATEGORY`: a public benchmark's tasks and own checker on the config's policy.

A benchmark is a class (`Benchmark`) another package registers in the entry-point group `alight.benchmarks`
(`mybench = "my_pkg.bench:MyBench"`); its agent sends each task's prompt to the policy (through the gateway, as
every rollout does) and its evaluator scores the recorded answer with the benchmark's own checker.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from alight.schemas import Mode
from alight_server.evaluation.policy import run_rollouts
from alight_server.evaluation.sources import plugin
from alight_server.trainer.config.run import TrainConfig


class Benchmark(Protocol):
    agent: str  # "my_pkg.bench:answer": answer(task), the policy's call and nothing else
    evaluator: str  # "my_pkg.bench:score": score(task, trajectory) -> 1.0 or 0.0

    def categories(self) -> dict[str, list[str]]: ...  # a name (or group) -> its categories
    def tasks(self, categories: list[str], limit: int | None) -> list[dict[str, Any]]: ...  # each with its "category"


def load_benchmark(spec: str) -> tuple[Benchmark, list[str]]:
    """The benchmark and categories `NAME:CATEGORY[,CATEGORY...]` names; ValueError naming the valid ones."""
    name, _, wanted = spec.partition(":")
    missing = (
        "no benchmark {name!r} installed; installed: {installed} "
        "(bfcl: pip install -e 'environments[bfcl]' and bash scripts/setup.sh --bfcl)"
    )
    benchmark: Benchmark = plugin("alight.benchmarks", name, missing)()
    known = benchmark.categories()
    unknown = [c for c in wanted.split(",") if c not in known]
    if not wanted or unknown:
        raise ValueError(f"{name} has no category {','.join(unknown) or '(none given)'!r}; valid: {', '.join(known)}")
    return benchmark, list(dict.fromkeys(c for group in wanted.split(",") for c in known[group]))


@dataclass
class CategoryScore:
    category: str
    scores: list[float]  # 1.0 right, 0.0 wrong (an unanswered task, infra or timeout, counts wrong)
    unanswered: int

    @property
    def accuracy(self) -> float:
        return sum(self.scores) / len(self.scores)

    @property
    def se(self) -> float:
        return math.sqrt(self.accuracy * (1 - self.accuracy) / len(self.scores))


@dataclass
class BenchmarkReport:
    spec: str
    categories: list[CategoryScore]

    @property
    def score(self) -> float:  # unweighted over categories, as BFCL's summary columns are
        return sum(c.accuracy for c in self.categories) / len(self.categories)

    @property
    def se(self) -> float:
        return math.sqrt(sum(c.se**2 for c in self.categories)) / len(self.categories)

    def lines(self) -> list[str]:
        tasks = sum(len(c.scores) for c in self.categories)
        out = [f"{self.spec}: {self.score:.3f} ± {self.se:.3f} (SE; mean over {len(self.categories)} categories, "
               f"{tasks} tasks)", f"  {'category':<24} {'tasks':>5} {'right':>5} {'score':>6} {'± SE':>6}"]  # fmt: skip
        for c in self.categories:
            out.append(f"  {c.category:<24} {len(c.scores):>5} {int(sum(c.scores)):>5} {c.accuracy:>6.3f} {c.se:>6.3f}"
                       + (f"  ({c.unanswered} unanswered: infra or timeout, counted wrong)" if c.unanswered else ""))  # fmt: skip
        return out

    def as_dict(self) -> dict[str, Any]:
        return {"benchmark": self.spec, "score": self.score, "se": self.se,
                "categories": {c.category: {"tasks": len(c.scores), "right": sum(c.scores), "score": c.accuracy,
                                            "se": c.se, "unanswered": c.unanswered} for c in self.categories}}  # fmt: skip


def run_benchmark(config: TrainConfig, spec: str, limit: int | None, folder: Path) -> BenchmarkReport:
    """Each task of the named categories (the first `limit` of each) once, in val mode, on the config's policy."""
    benchmark, categories = load_benchmark(spec)
    tasks = benchmark.tasks(categories, limit)
    agent = config.agent.model_copy(update={"entrypoint": benchmark.agent, "command": None})
    config = config.model_copy(update={"agent": agent, "evaluator": benchmark.evaluator})
    scores = run_rollouts(config, spec.partition(":")[0], tasks, 1, Mode.VAL, folder)[1]
    table = {c: CategoryScore(c, [], 0) for c in categories}
    for task, (value,) in zip(tasks, scores, strict=True):
        table[task["category"]].scores.append(value or 0.0)
        table[task["category"]].unanswered += value is None
    return BenchmarkReport(spec, [c for c in table.values() if c.scores])
