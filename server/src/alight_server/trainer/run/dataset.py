"""Task datasets: JSONL, JSON, Parquet or a Hugging Face `datasets` object, split into train and val."""

from __future__ import annotations

import json
import random
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
    """Train and val tasks. `train` / `val` override the configured files (e.g. `datasets.Dataset` objects)."""
    train_rows = read_tasks(train if train is not None else config.train)
    if not train_rows:
        raise ValueError(f"the training dataset {config.train!r} has no rows")
    if config.shuffle:
        random.Random(seed).shuffle(train_rows)
    if val is not None or config.val is not None:
        val_rows = read_tasks(val if val is not None else config.val)  # type: ignore[arg-type]
    elif config.val_size:
        if config.val_size >= len(train_rows):
            raise ValueError(f"val_size {config.val_size} leaves no training rows out of {len(train_rows)}")
        train_rows, val_rows = train_rows[: -config.val_size], train_rows[-config.val_size :]
    else:
        val_rows = []
    return TaskSplits(train_rows, val_rows)


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
