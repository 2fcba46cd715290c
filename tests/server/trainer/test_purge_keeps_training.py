"""Retention and the trainer's own rollouts: the ids the training loop makes are the ones a purge keeps while it runs.

The loop's functions name and create the rollouts (a synchronous step's groups, an async pool group) through
the real API; the purge reads "its training run is running" from those ids and the run's reported status.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from alight.client import AlightClient
from alight.schemas import AttemptFinish, Mode, RunnerSpec, RunReport, RunStatus
from alight_server.store.base import PurgeScope
from alight_server.store.rows import now
from alight_server.trainer.run.async_pool import group_prefix
from alight_server.trainer.run.rollouts import create_group_rollouts
from tests.conftest import LiveServer

RUN = "a1b2c3d4"  # as TrainingRun makes them: uuid hex[:8]


@pytest.fixture
def client(live_server: LiveServer) -> Iterator[AlightClient]:
    with AlightClient(live_server.url, live_server.admin_key) as c:
        yield c


def _trained(client: AlightClient, run_dir: Path) -> list[str]:
    """A step's two groups of two (`<run>-s00000-...`) and one async group (`<run>-g000001-...`), all ended."""
    runner = RunnerSpec(entrypoint="agent.py:main")
    metadata = {"step": 0, "run_dir": str(run_dir)}
    phases = ((f"{RUN}-s{0:05d}", [{"q": 1}, {"q": 2}]), (group_prefix(RUN, 1), [{"q": 3}]))  # async: a task a group
    created = [
        r.id
        for prefix, tasks in phases
        for r in create_group_rollouts(client, prefix, tasks, 2, Mode.TRAIN, runner, 60.0, 1, metadata)
    ]
    for start in client.claim_attempts(len(created), ids=created):
        client.finish_attempt(start.rollout.id, start.attempt, AttemptFinish(status="succeeded"))
    return created


def test_a_running_trainings_rollouts_are_kept_until_its_run_reports_its_end(
    client: AlightClient, live_server: LiveServer, tmp_path: Path
) -> None:
    client.report_run(RunReport(id=RUN, status=RunStatus.RUNNING))
    created = _trained(client, tmp_path)
    assert len(created) == 6

    while_running = live_server.store.purge_rollouts(PurgeScope(before=now()))
    assert while_running.rollouts == []
    assert while_running.kept == {"its training run is running": 6}

    client.report_run(RunReport(id=RUN, status=RunStatus.SUCCEEDED))
    ended = live_server.store.purge_rollouts(PurgeScope(before=now()))
    assert sorted(rid for rid, _ in ended.rollouts) == sorted(created)
    assert all(run_dir == str(tmp_path) for _, run_dir in ended.rollouts)
