"""Task datasets: JSONL, JSON, Parquet, a Hugging Face `datasets` object or a task source, split into train and val."""

from __future__ import annotations

import json
import random
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from alight_server.evaluation.sources import check_disjoint, load_source
from alight_server.trainer.config.sections import DatasetConfig


def read_tasks(source: str | Path | Iterable[Any]) -> list[Any]:
    """Rows of a .jsonl / .json / .parquet file, or of any iterable (a `datasets.Dataset`, a list)."""
    if not isinstance(source, str | Path):
        return [dict(row) if isinstance(row, dict) else row for row in source]
    path = Path(source)
    if not path.is_file():
        raise FileNotFoundError(f"dataset file {str(path)!r} does not exist")
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        rows = []
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{number} is not valid JSON ({exc.msg}); each line must be one task") from None
        return rows
    if suffix == ".json":
        rows = json.loads(path.read_text())
        if not isinstance(rows, list):
            raise ValueError(f"{path} must hold a JSON list of tasks, got {type(rows).__name__}")
        return rows
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    raise ValueError(f"dataset file {str(path)!r} must end in .jsonl, .json or .parquet")


@dataclass
class TaskSplits:
    train: list[Any]
    val: list[Any]


def load_splits(config: DatasetConfig, seed: int, train: Any = None, val: Any = None) -> TaskSplits:
    """Train and val tasks from the config's source. `train` / `val` override the configured files (e.g.
    `datasets.Dataset` objects)."""
    spec = {**config.model_dump(exclude={"source"}), "train_rows": train, "val_rows": val}
    if config.source == "jsonl":
        return TaskSplits(*_jsonl_splits(spec, seed))
    train_rows, val_rows = load_source(config.source).splits(spec, seed if config.seed is None else config.seed)
    if not train_rows:
        raise ValueError(f"the task source {config.source!r} made no training tasks from {spec}")
    check_disjoint(train_rows, val_rows, config.source)
    return TaskSplits(train_rows, val_rows)


def _jsonl_splits(spec: dict[str, Any], seed: int) -> tuple[list[Any], list[Any]]:
    """The built-in source: the dataset's files (or the rows handed in as train_rows / val_rows)."""
    if not isinstance(spec["train"], str) and spec["train_rows"] is None:
        raise ValueError(f"dataset.train is {spec['train']!r}: a file of tasks, or a count with a source: "
                     "(e.g. source: reasoning_gym)")  # fmt: skip
    train_rows = read_tasks(spec["train_rows"] if spec["train_rows"] is not None else spec["train"])
    if not train_rows:
        raise ValueError(f"the training dataset {spec['train']!r} has no rows")
    if spec["shuffle"]:
        random.Random(seed).shuffle(train_rows)
    if spec["val_rows"] is not None or spec["val"] is not None:
        val_rows = read_tasks(spec["val_rows"] if spec["val_rows"] is not None else spec["val"])
    elif spec["val_size"]:
        if spec["val_size"] >= len(train_rows):
            raise ValueError(f"val_size {spec['val_size']} leaves no training rows out of {len(train_rows)}")
        train_rows, val_rows = train_rows[: -spec["val_size"]], train_rows[-spec["val_size"] :]
    else:
        val_rows = []
    return train_rows, val_rows


class TaskCursor:
    """Walks the training tasks in order, epoch after epoch (reshuffled per epoch); its state is checkpointed."""

    def __init__(self, tasks: list[Any], seed: int) -> None:
        self.tasks = tasks
        self.seed = seed
        self.epoch = 0
        self.position = 0
        self._order = self._permutation()

    def _permutation(self) -> list[int]:
        order = list(range(len(self.tasks)))
        if self.epoch:  # epoch 0 keeps the dataset order (already shuffled once by load_splits)
            random.Random(self.seed * 1_000_003 + self.epoch).shuffle(order)
        return order

    def take(self, count: int) -> list[Any]:
        picked = []
        for _ in range(count):
            if self.position >= len(self._order):
                self.epoch, self.position = self.epoch + 1, 0
                self._order = self._permutation()
            picked.append(self.tasks[self._order[self.position]])
            self.position += 1
        return picked

    def state(self) -> dict[str, int]:
        return {"epoch": self.epoch, "position": self.position}

    def restore(self, state: dict[str, int]) -> None:
        self.epoch, self.position = int(state["epoch"]), int(state["position"])
        self._order = self._permutation()
