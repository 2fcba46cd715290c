"""Fixtures for the controller tests (helpers live in controller_testkit.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from controller_testkit import REGISTRY, k8s_runner

from alight.client import AlightClient
from alight_server.controller.k8s import KubernetesRunner
from alight_server.controller.local import LocalRunner
from alight_server.controller.loop import Controller
from alight_testing.fake_k8s import FakeCluster


@pytest.fixture
def logs_dir(tmp_path: Path) -> Path:
    return tmp_path / "logs"


def fast_controller(live_server: Any, runner: Any, concurrency: int, **options: Any) -> Controller:
    """A Controller on the live server with test-speed ticks, watches and kill grace."""
    client = AlightClient(live_server.url, admin_key=live_server.admin_key)
    return Controller(
        client, runner, concurrency=concurrency, poll_interval=0.05, kill_grace_s=0.3, watch_interval=0.1, **options
    )


@pytest.fixture
def controllers(live_server: Any, logs_dir: Path) -> Iterator[Callable[..., Controller]]:
    """make(concurrency=...) -> a Controller on the live server with fast ticks; all stopped (killing) at the end."""
    made: list[Controller] = []

    def make(concurrency: int = 4, **options: Any) -> Controller:
        made.append(fast_controller(live_server, LocalRunner(logs_dir), concurrency, **options))
        return made[-1]

    yield make
    for controller in made:
        controller.stop(kill_running=True)


@pytest.fixture
def cluster() -> Iterator[FakeCluster]:
    """A fake one-node Kubernetes on loopback whose registry holds AGENT_IMAGE (also as AGENT_TAG)."""
    with FakeCluster(images=REGISTRY) as fake:
        yield fake


@pytest.fixture
def k8s_controllers(live_server: Any, cluster: FakeCluster) -> Iterator[Callable[..., Controller]]:
    """make(runner=..., **controller options) -> a Controller running Jobs on the fake cluster; all stopped at the end.

    `runner` holds KubernetesRunner options over the test defaults (a 1 s grace, 2 s TTL, 1 s limits).
    """
    made: list[Controller] = []

    def make(concurrency: int = 4, runner: dict[str, Any] | None = None, **options: Any) -> Controller:
        jobs = k8s_runner(cluster, agent_server_url=live_server.url, **(runner or {}))
        made.append(fast_controller(live_server, jobs, concurrency, **options))
        return made[-1]

    yield make
    for controller in made:
        controller.stop(kill_running=True)
        assert isinstance(controller.runner, KubernetesRunner)
        controller.runner.close()
