"""What Kubernetes reports about an attempt's Job and Pods, read as a RunStatus: the table in docs/controller.md,
"How a Job ends" (outcome.py turns each phase into the attempt's outcome).
"""

from __future__ import annotations

from calendar import timegm
from collections.abc import Callable
from dataclasses import dataclass, replace
from time import strptime
from typing import Any

from alight_server.controller.base import RunPhase, RunStatus

Obj = dict[str, Any]
IMAGE_ERRORS = {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"}
CONFIG_ERRORS = {"CreateContainerConfigError", "CreateContainerError", "RunContainerError"}
START_ERRORS = {"StartError", "ContainerCannotRun"}


@dataclass(frozen=True)
class Limits:
    unschedulable_s: float = 300.0  # a Pod no node can take: the cluster is full, or the requests are too big
    config_error_s: float = 120.0  # a container that cannot be created (a missing Secret or ConfigMap)
    settle_s: float = 10.0  # a finished Job whose Pod we never saw: how long to wait for the Pod's status


def epoch(timestamp: str | None) -> float | None:
    if not timestamp:
        return None
    return float(timegm(strptime(timestamp.replace(".000000", "")[:19], "%Y-%m-%dT%H:%M:%S")))


def _condition(obj: Obj, type_: str) -> Obj | None:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == type_ and c.get("status") == "True"), None)


def _container_state(pod: Obj) -> Obj:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return (statuses[0].get("state") or {}) if statuses else {}


def _disrupted(pod: Obj) -> str | None:
    """Why the node or the cluster ended this Pod (eviction, lost node, preemption), or None."""
    status = pod.get("status") or {}
    why = []
    if status.get("reason") in ("Evicted", "NodeLost", "Shutdown", "Terminated", "UnexpectedAdmissionError"):
        why.append(f"{status['reason']}: {status.get('message', '')}".rstrip(": "))
    if (disruption := _condition(pod, "DisruptionTarget")) is not None:
        why.append(f"{disruption.get('reason')}: {disruption.get('message', '')}".rstrip(": "))
    return "; ".join(why) or None


def _terminal(pod: Obj, job_name: str) -> RunStatus | None:
    """The outcome a finished Pod reports, or None while its container has not terminated."""
    name = pod["metadata"]["name"]
    if (disrupted := _disrupted(pod)) is not None:
        return RunStatus(
            RunPhase.KILLED, message=f"Pod {name} of Job {job_name} was stopped by Kubernetes ({disrupted})"
        )
    terminated = _container_state(pod).get("terminated")
    if terminated is None:
        if (pod.get("status") or {}).get("phase") == "Failed":
            why = f"{pod['status'].get('reason', '')} {pod['status'].get('message', '')}".strip() or "no reason given"
            return RunStatus(RunPhase.LOST, message=f"Pod {name} of Job {job_name} failed before its agent ran: {why}")
        return None
    code, reason = terminated.get("exitCode"), terminated.get("reason")
    if reason == "OOMKilled":
        message = f"the agent container of Pod {name} was OOMKilled (exit {code}); raise its memory limit"
        return RunStatus(RunPhase.KILLED, exit_code=code, message=message)
    if reason in START_ERRORS:
        return RunStatus(RunPhase.FAILED_TO_START, message=f"Pod {name}: {reason}: {terminated.get('message', '')}")
    return RunStatus(RunPhase.EXITED, exit_code=code)


def _pending(pod: Obj, job_name: str, limits: Limits, waited: Callable[[str], float]) -> RunStatus | None:
    """An attempt that will never start, from a Pod still pending; None while it may yet start."""
    name = pod["metadata"]["name"]
    waiting = _container_state(pod).get("waiting") or {}
    reason = waiting.get("reason")
    if reason in IMAGE_ERRORS:
        message = f"Pod {name} of Job {job_name} cannot pull its image: {reason}: {waiting.get('message', '')}"
        return RunStatus(RunPhase.FAILED_TO_START, message=message)
    if reason in CONFIG_ERRORS and waited(f"{name}/{reason}") >= limits.config_error_s:
        message = f"Pod {name} of Job {job_name} could not create its container for {limits.config_error_s:g}s: "
        return RunStatus(RunPhase.FAILED_TO_START, message=message + f"{reason}: {waiting.get('message', '')}")
    scheduled = next(
        (c for c in (pod.get("status") or {}).get("conditions") or [] if c.get("type") == "PodScheduled"), None
    )
    if (
        scheduled is not None
        and (scheduled.get("status"), scheduled.get("reason")) == ("False", "Unschedulable")
        and waited(f"{name}/Unschedulable") >= limits.unschedulable_s
    ):
        message = f"Pod {name} of Job {job_name} stayed unschedulable for {limits.unschedulable_s:g}s: "
        return RunStatus(RunPhase.FAILED_TO_START, message=message + str(scheduled.get("message", "")))
    return None


def classify(
    job_name: str,
    job: Obj | None,
    pods: list[Obj],
    gone: list[Obj],
    *,
    limits: Limits,
    waited: Callable[[str], float],
    now: float,
) -> RunStatus:
    """The attempt's phase from its Job (None: deleted), live Pods and Pods deleted since it started."""
    if job is None:
        return RunStatus(RunPhase.LOST, message=f"Job {job_name} was deleted while the attempt ran")
    started_at = epoch(job["metadata"].get("creationTimestamp"))
    failed = _condition(job, "Failed")
    # The Job controller marks FailureTarget before it deletes the Pods and sets Failed after: from the first
    # the Pods' deletion is the deadline's doing, not someone else's.
    ending = failed or _condition(job, "FailureTarget")
    deadline = job["spec"].get("activeDeadlineSeconds")
    deadline_status = RunStatus(
        RunPhase.DEADLINE,
        message=f"Kubernetes stopped Job {job_name} at its activeDeadlineSeconds ({deadline}s)",
        started_at=started_at,
    )
    if ending is not None and ending.get("reason") == "DeadlineExceeded":
        return deadline_status
    for pod in pods:
        if not pod["metadata"].get("deletionTimestamp") and (ended := _terminal(pod, job_name)) is not None:
            return replace(ended, started_at=started_at)
    if job["metadata"].get("deletionTimestamp"):
        return RunStatus(
            RunPhase.LOST, message=f"Job {job_name} was deleted while the attempt ran", started_at=started_at
        )
    for pod in [*gone, *(p for p in pods if p["metadata"].get("deletionTimestamp"))]:
        disrupted = _disrupted(pod)
        # Jobs and Pods come on two watches: the Pods' deletion can arrive before the Job's FailureTarget. A Pod
        # deleted once the Job's deadline has passed is the deadline's doing.
        active_since = epoch((job.get("status") or {}).get("startTime")) or started_at
        if ending is None and not disrupted and deadline and active_since and now >= active_since + float(deadline):
            return deadline_status
        why = f" ({disrupted})" if disrupted else " (by someone else, or its node was lost)"
        message = f"Pod {pod['metadata']['name']} of Job {job_name} was deleted before its agent finished{why}"
        return RunStatus(RunPhase.KILLED, message=message, started_at=started_at)
    for pod in pods:
        if (stuck := _pending(pod, job_name, limits, waited)) is not None:
            return replace(stuck, started_at=started_at)
    finished = failed or _condition(job, "Complete")
    if finished is not None and now - (epoch(finished.get("lastTransitionTime")) or now) >= limits.settle_s:
        if finished["type"] == "Complete":
            return RunStatus(RunPhase.EXITED, exit_code=0, started_at=started_at)
        why = f"{finished.get('reason', '')}: {finished.get('message', '')}"
        return RunStatus(
            RunPhase.LOST, message=f"Job {job_name} failed and its Pod is gone ({why})", started_at=started_at
        )
    return RunStatus(RunPhase.RUNNING, started_at=started_at)
