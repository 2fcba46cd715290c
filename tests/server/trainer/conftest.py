"""Fixtures for the trainer run tests: a tiny-model config around the test tool agent."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from alight_server.trainer.config import TrainConfig, parse_config

AGENT = Path(__file__).parent / "agents" / "tool_agent.py"
WORDS = ["apple", "river", "stone"]


@pytest.fixture
def tiny_config(tmp_path: Path) -> Callable[..., TrainConfig]:
    """make(**overrides) -> a TrainConfig for the tiny model writing under tmp_path."""

    def make(**overrides: Any) -> TrainConfig:
        train = tmp_path / "train.jsonl"
        train.write_text("".join(f'{{"word": "{w}"}}\n' for w in WORDS * 4))
        raw: dict[str, Any] = {
            "model": "tiny",
            "dataset": {"train": str(train), "val_size": 2},
            "agent": {"entrypoint": f"{AGENT}:main"},
            "group_size": 2,
            "tasks_per_step": 2,
            "steps": 2,
            "output_dir": str(tmp_path / "run"),
            "optimizer": {"lr": 1e-3},
            "inference": {"device": "cpu", "torch_threads": 1},
            "controller": {"concurrency": 4},
            "metrics": {"tensorboard": True},
        }
        for key, value in overrides.items():
            raw[key] = {**raw[key], **value} if isinstance(value, dict) and key in raw else value
        return parse_config(raw, tmp_path)

    return make


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Asynchronous end-to-end runs take minutes: only when selected (`pytest -m async_e2e tests/server/trainer`)."""
    if "async_e2e" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="async end-to-end run: pytest -m async_e2e tests/server/trainer (docs/training.md)")
    for item in items:
        if "async_e2e" in item.keywords:
            item.add_marker(skip)
