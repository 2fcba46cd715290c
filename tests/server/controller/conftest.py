"""Fixtures for the controller tests (helpers live in controller_testkit.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from alight.client import AlightClient
from alight_server.controller.local import LocalRunner
from alight_server.controller.loop import Controller


@pytest.fixture
def logs_dir(tmp_path: Path) -> Path:
    return tmp_path / "logs"


@pytest.fixture
def controllers(live_server: Any, logs_dir: Path) -> Iterator[Callable[..., Controller]]:
    """make(concurrency=...) -> a Controller on the live server with fast ticks; all stopped (killing) at the end."""
    made: list[Controller] = []

    def make(concurrency: int = 4, **options: Any) -> Controller:
        client = AlightClient(live_server.url, admin_key=live_server.admin_key)
        controller = Controller(
            client,
            LocalRunner(logs_dir),
            concurrency=concurrency,
            poll_interval=0.05,
            kill_grace_s=0.3,
            watch_interval=0.1,
            **options,
        )
        made.append(controller)
        return controller

    yield make
    for controller in made:
        controller.stop(kill_running=True)
