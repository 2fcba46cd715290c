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


def _read(job: dict[str, Any], pods: list[dict[str, Any]], gone: list[dict[str, Any]]) -> Any:
    return classify("alight-r-1", job, pods, gone, limits=Limits(), waited=lambda _: 0.0, now=1796306406.0)


def test_pods_deleted_under_failure_target_deadline_exceeded_are_the_deadline() -> None:
    # Between FailureTarget and Failed the Job controller deletes the Pods: seen live and seen gone.
    for pods, gone in (([_deleted_pod()], []), ([], [_deleted_pod()])):
        status = _read(_job(("FailureTarget", "DeadlineExceeded")), pods, gone)
        assert status.phase is RunPhase.DEADLINE and "activeDeadlineSeconds (5s)" in (status.message or "")
    assert _read(_job(("FailureTarget", "DeadlineExceeded"), ("Failed", "DeadlineExceeded")), [], []).phase is (
        RunPhase.DEADLINE
    )


def test_a_pod_deleted_with_no_deadline_on_the_job_is_still_a_kill() -> None:
    for job in (_job(), _job(("FailureTarget", "BackoffLimitExceeded"))):
        assert _read(job, [], [_deleted_pod()]).phase is RunPhase.KILLED
