"""The raw config of a short training run of the tiny model on CPU, which run tests adjust to their case."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def tiny_run_config(folder: Path, entrypoint: str, tasks: list[dict[str, Any]], **overrides: Any) -> dict[str, Any]:
    """Two steps of two groups of two on `tasks` (written to folder/tasks.jsonl) for `entrypoint` ("file.py:function").

    An override that is a mapping merges into that section; anything else replaces the value.
    """
    train = folder / "tasks.jsonl"
    train.write_text("".join(json.dumps(task) + "\n" for task in tasks))
    raw: dict[str, Any] = {
        "model": "tiny",
        "dataset": {"train": str(train), "val_size": 2},
        "agent": {"entrypoint": entrypoint},
        "group_size": 2,
        "tasks_per_step": 2,
        "steps": 2,
        "output_dir": str(folder / "run"),
        "optimizer": {"lr": 1e-3},
        "inference": {"device": "cpu", "torch_threads": 1},
        "controller": {"concurrency": 4},
        # No random audit: a test's groups train when it says (an audited group is held until a person decides).
        "review": {"audit_share": 0.0},
    }
    for key, value in overrides.items():
        raw[key] = {**raw[key], **value} if isinstance(value, dict) and isinstance(raw.get(key), dict) else value
    return raw
