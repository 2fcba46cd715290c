"""Training runs and their step metrics in the store, on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from alight.schemas import RunReport, RunStatus, RunStepReport
from alight_server.store.base import NotFound
from alight_server.store.sql import SqlStore


def test_a_reported_run_is_listed_with_its_config_and_latest_step(any_store: SqlStore) -> None:
    any_store.report_run(RunReport(id="run1", config={"model": "tiny"}, steps_planned=3))
    any_store.add_run_step("run1", RunStepReport(step=0, metrics={"val/score": 0.2}))
    any_store.add_run_step("run1", RunStepReport(step=1, metrics={"train/reward_mean": 0.4}))
    (run,) = any_store.list_runs()
    assert (run.id, run.status, run.config, run.steps_planned, run.step) == ("run1", "running", {"model": "tiny"}, 3, 1)


def test_reporting_a_run_again_updates_its_status(any_store: SqlStore) -> None:
    any_store.report_run(RunReport(id="run1"))
    any_store.report_run(RunReport(id="run1", status=RunStatus.SUCCEEDED, config={"a": 1}))
    run = any_store.get_run("run1")
    assert run.status == RunStatus.SUCCEEDED and run.config == {"a": 1}
    assert len(any_store.list_runs()) == 1


def test_a_step_reported_twice_keeps_the_union_of_its_metrics(any_store: SqlStore) -> None:
    any_store.report_run(RunReport(id="run1"))
    any_store.add_run_step("run1", RunStepReport(step=2, metrics={"train/loss": 1.0, "val/score": 0.5}))
    any_store.add_run_step("run1", RunStepReport(step=2, metrics={"train/loss": 0.5}))
    (step,) = any_store.list_run_steps("run1")
    assert step.metrics == {"train/loss": 0.5, "val/score": 0.5}


def test_steps_of_an_unknown_run_are_refused(any_store: SqlStore) -> None:
    with pytest.raises(NotFound, match="no run with id 'ghost'"):
        any_store.add_run_step("ghost", RunStepReport(step=1, metrics={}))
    with pytest.raises(NotFound):
        any_store.list_run_steps("ghost")


def test_runs_are_listed_newest_first(any_store: SqlStore) -> None:
    for name in ("old", "new"):
        any_store.report_run(RunReport(id=name))
    assert [r.id for r in any_store.list_runs()] == ["new", "old"]
