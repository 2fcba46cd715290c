"""Task sources: a config's `dataset: {source: NAME, ...}` and `evaluator: {source: NAME}`, found by entry point.

A source makes a run's tasks and, where it has one, scores an answer against a task the server stored, so the
reward is the source's own and nothing the agent wrote or sent. Another package is one module away::

    class Dice:
        def splits(self, spec: dict, seed: int) -> tuple[list[dict], list[dict]]:
            # spec: the dataset section less `source` (here {"train": 100, "validation": 10})
            rng = random.Random(seed)
            rows = [{"question": f"{a} + {b}?", "a": a, "b": b} for a, b in ...]  # no task in both lists
            return rows[: spec["train"]], rows[spec["train"] :]

        def score(self, task: dict, answer: str) -> float:  # task: as the server stored it
            return float(answer.strip() == str(task["a"] + task["b"]))

    # pyproject.toml: [project.entry-points."alight.task_sources"]  dice = "my_pkg.dice:Dice"

`source:` also takes "my_pkg.dice:Dice" or "dice.py:Dice" directly. Built in: `jsonl` (the file form of
`dataset:`); alight-environments ships `reasoning_gym` (pip install 'alight-environments[reasoning-gym]').
"""

from __future__ import annotations

import json
from importlib.metadata import entry_points
from typing import Any, Protocol

from pydantic import Field

from alight.entry import load_target
from alight.schemas import Strict

GROUP = "alight.task_sources"


class SourceKeys(Strict):
    """A source's keys in `dataset:` (the trainer's DatasetConfig), e.g. {source: reasoning_gym, task: chain_sum,
    train: 2000, validation: 128, seed: 0, config: {...}}: `train` and `validation` are then counts."""

    source: str = Field(default="jsonl", min_length=1)  # jsonl: the dataset's files
    task: str | None = None
    config: dict[str, Any] = Field(default_factory=dict[str, Any])
    seed: int | None = None  # unset: the run's seed
    validation: int = Field(default=0, ge=0)


class Scorer(Protocol):
    def score(self, task: Any, answer: str) -> float: ...


def load_source(name: str) -> Any:
    """The source a config names: an entry point of GROUP, or "module:Class" / "file.py:Class"."""
    if ":" in name:
        return load_target(name)()
    return plugin(GROUP, name, "no task source {name!r}; installed: {installed} (and the built-in 'jsonl'). "
                  "reasoning_gym comes with: pip install 'alight-environments[reasoning-gym]'")()  # fmt: skip


def plugin(group: str, name: str, missing: str) -> Any:
    """What an installed distribution registers as `name` in the entry-point group `group` (task sources,
    benchmarks, environments: alight-environments' parts); else ValueError(missing with {name} and {installed})."""
    found = {point.name: point for point in entry_points(group=group)}
    if name not in found:
        raise ValueError(missing.format(name=name, installed=sorted(found) or "none"))
    return found[name].load()


def load_scorer(name: str) -> Scorer:
    source = load_source(name)
    if not callable(getattr(source, "score", None)):
        raise ValueError(f"the task source {name!r} has no scorer (no score(task, answer)); name another evaluator")
    return source


def check_disjoint(train: list[Any], val: list[Any], name: str) -> None:
    """Refuse splits that share a task: a held-out score on trained tasks measures memory, not learning."""
    seen = {json.dumps(task, sort_keys=True) for task in train}
    shared = [task for task in val if json.dumps(task, sort_keys=True) in seen]
    if shared:
        raise ValueError(f"the task source {name!r} put {len(shared)} task(s) in both train and validation, "
                         f"e.g. {json.dumps(shared[0])[:300]}; its splits must be disjoint")  # fmt: skip
