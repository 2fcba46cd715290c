"""The Job and Pods Kubernetes reports in the middle of a deadline: read as the deadline, never as a kill."""

from __future__ import annotations

from typing import Any

from alight_server.controller.base import RunPhase
from alight_server.controller.k8s.classify import Limits, classify


def _job(*conditions: tuple[str, str]) -> dict[str, Any]:
    return {
        "metadata": {"name": "alight-r-1", "creationTimestamp": "2026-12-03T10:00:00Z"},
        "spec": {"activeDeadlineSeconds": 5},
        "status": {"conditions": [{"type": t, "status": "True", "reason": r} for t, r in conditions]},
    }


def _deleted_pod() -> dict[str, Any]:
    return {"metadata": {"name": "alight-r-1-x7k2p", "deletionTimestamp": "2026-12-03T10:00:05Z"}, "status": {}}


CREATED = 1796292000.0  # the Job's creationTimestamp as an epoch


def _read(job: dict[str, Any], pods: list[dict[str, Any]], gone: list[dict[str, Any]], after_s: float = 6.0) -> Any:
    now = CREATED + after_s
    return classify("alight-r-1", job, pods, gone, limits=Limits(), waited=lambda _: 0.0, now=now)


def test_pods_deleted_under_failure_target_deadline_exceeded_are_the_deadline() -> None:
    # Between FailureTarget and Failed the Job controller deletes the Pods: seen live and seen gone.
    for pods, gone in (([_deleted_pod()], []), ([], [_deleted_pod()])):
        status = _read(_job(("FailureTarget", "DeadlineExceeded")), pods, gone)
        assert status.phase is RunPhase.DEADLINE and "activeDeadlineSeconds (5s)" in (status.message or "")
    assert _read(_job(("FailureTarget", "DeadlineExceeded"), ("Failed", "DeadlineExceeded")), [], []).phase is (
        RunPhase.DEADLINE
    )


def test_a_pod_deleted_with_no_deadline_on_the_job_is_still_a_kill() -> None:
    assert _read(_job(), [], [_deleted_pod()], after_s=3).phase is RunPhase.KILLED  # before its deadline
    assert _read(_job(("FailureTarget", "BackoffLimitExceeded")), [], [_deleted_pod()]).phase is RunPhase.KILLED
    no_deadline = _job()
    del no_deadline["spec"]["activeDeadlineSeconds"]
    assert _read(no_deadline, [], [_deleted_pod()], after_s=3600).phase is RunPhase.KILLED


def test_pods_deleted_past_the_deadline_before_the_job_says_so_are_the_deadline() -> None:
    # Jobs and Pods arrive on two watches: the Pods' deletion can be seen before the Job's FailureTarget (seen
    # under load in test_k8s_runner's deadline test, read as a kill by someone else).
    for pods, gone in (([_deleted_pod()], []), ([], [_deleted_pod()])):
        status = _read(_job(), pods, gone, after_s=5)
        assert status.phase is RunPhase.DEADLINE and "activeDeadlineSeconds (5s)" in (status.message or "")
    started_late = _job()  # the deadline counts from status.startTime when the Job has one
    started_late["status"]["startTime"] = "2026-12-03T10:00:04Z"
    assert _read(started_late, [], [_deleted_pod()], after_s=6).phase is RunPhase.KILLED
    assert _read(started_late, [], [_deleted_pod()], after_s=9).phase is RunPhase.DEADLINE
