"""Fixtures for the trainer run tests: a tiny-model config around the test tool agent."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from gated_run import gated_run  # noqa: F401 - one gated `alight train` per session, read by several files
from judge_fixtures import scripted_judge  # noqa: F401 - the scripted judge upstream, for the judge tests

from alight.client import AlightClient
from alight_server.trainer.config.run import TrainConfig, parse_config
from alight_server.trainer.run.async_pool import GroupPool
from alight_server.trainer.run.dataset import TaskCursor
from alight_testing.tiny_run import tiny_run_config

AGENT = Path(__file__).parent / "agents" / "tool_agent.py"
WORDS = ["apple", "river", "stone"]


@pytest.fixture
def tiny_config(tmp_path: Path) -> Callable[..., TrainConfig]:
    """make(**overrides) -> a TrainConfig for the tiny model writing under tmp_path (a None override drops
    that section); `function` picks the tool agent's entrypoint (main: the OpenAI client, main_http: httpx)."""

    def make(function: str = "main", **overrides: Any) -> TrainConfig:
        tasks = [{"word": w} for w in WORDS * 4]
        kept = {k: v for k, v in overrides.items() if v is not None}
        raw = tiny_run_config(tmp_path, f"{AGENT}:{function}", tasks, **kept)
        for key in overrides.keys() - kept.keys():
            raw.pop(key, None)
        return parse_config(raw, tmp_path)

    return make


@pytest.fixture
def client(live_server: Any) -> Iterator[AlightClient]:
    """The SDK's client on the live server, under the admin key."""
    with AlightClient(live_server.url, live_server.admin_key, timeout=30) as c:
        yield c


@pytest.fixture
def async_config(tmp_path: Path) -> Callable[..., TrainConfig]:
    """make(sections=None, **async_rollout) -> an asynchronous run's config with nothing to run (the test plays
    the controller): 2 tasks x 2 a step, 3 active groups; `sections` are merged over it (policies:, routing:)."""

    def make(sections: dict[str, Any] | None = None, **async_rollout: Any) -> TrainConfig:
        raw = {
            "model": "tiny",
            "dataset": {"train": str(tmp_path / "unused.jsonl")},
            "agent": {"command": ["true"]},
            "group_size": 2,
            "tasks_per_step": 2,
            "max_attempts": 1,
            "async_rollout": {"enabled": True, "active_groups": 3, **async_rollout},
            **(sections or {}),
        }
        return parse_config(raw, tmp_path)

    return make


def make_pool(client: AlightClient, config: TrainConfig, tasks: list[dict[str, Any]]) -> GroupPool:
    """The run's group pool over `tasks`, polling every 50 ms."""
    return GroupPool(client, config, "run", TaskCursor(list(tasks), seed=0), {}, poll_s=0.05)
