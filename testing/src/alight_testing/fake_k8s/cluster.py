"""The fake cluster: a one-node Kubernetes (Job controller, garbage collector, TTL controller, kubelet) on loopback.

    with FakeCluster(images={"agent:1"}) as cluster:
        configuration = cluster.configuration()   # a kubernetes.client.Configuration pointing at it
        ...
        cluster.oom_kill(pod_name)                # what only a node can do, for tests
        cluster.down(); cluster.up()              # the API server unreachable for a while

Controllers reconcile every 50 ms, as the real ones do on their informers:
a new Job gets one Pod (`<job>-<5 chars>`, labelled `job-name` and
`controller-uid`, owned by the Job); the Pod's end becomes the Job's
`Complete` or `Failed` (`BackoffLimitExceeded`) condition; a Job past its
`activeDeadlineSeconds` fails with `DeadlineExceeded` and its Pods are
deleted; a finished Job is deleted `ttlSecondsAfterFinished` later; objects
whose owners are gone are deleted (cascade); a Job deleted with `Foreground`
propagation stays, with a deletionTimestamp, until its dependents are gone.
"""

from __future__ import annotations

import secrets
import sys
import tempfile
import threading
import time
from calendar import timegm
from pathlib import Path
from typing import Any

from alight_server.stacks.server_thread import ServerThread, free_port
from alight_testing.fake_k8s.api import create_api
from alight_testing.fake_k8s.kubelet import TICK_S, PodRun
from alight_testing.fake_k8s.objects import ApiError, Obj, ObjectStore, now_rfc3339, owned_by


def _epoch(timestamp: str) -> float:
    return float(timegm(time.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ")))


_DEADLINE_MESSAGE = "Job was active longer than specified deadline"


def _condition(type_: str, reason: str | None, message: str | None) -> Obj:
    condition: Obj = {"type": type_, "status": "True", "lastTransitionTime": now_rfc3339()}
    if reason:
        condition.update(reason=reason, message=message)
    return condition


def _finished(job: Obj) -> bool:
    conditions = (job.get("status") or {}).get("conditions") or []
    return any(c["type"] in ("Complete", "Failed") and c["status"] == "True" for c in conditions)


class FakeCluster:
    """One namespace-aware API server over one fake node; see the module docstring."""

    def __init__(
        self,
        images: set[str] | None = None,
        namespaces: set[str] | None = None,
        node_capacity: dict[str, str] | None = None,
        denied: set[tuple[str, str, str]] | None = None,
    ) -> None:
        self.store = ObjectStore()
        # What the registry holds (kubelet.pulled_image_id): name:tag@sha256:..., name@sha256:... or name:tag.
        self.images = set(images or ())
        self.namespaces = set(namespaces or {"default"})
        self.node_capacity = node_capacity or {"cpu": "8", "memory": "16Gi"}
        self.denied = set(denied or ())  # (group, resource, verb) the caller may not do (SelfSubjectAccessReview)
        self.workdir = Path(tempfile.mkdtemp(prefix="fake-k8s-"))
        self.path = f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin"
        self.runs: dict[tuple[str, str], PodRun] = {}
        self.requests: list[tuple[str, str]] = []  # (method, path) of every API call, for tests
        self.port = free_port()
        self.watch_generation = 0  # bumped to cut every open watch stream
        self._server: ServerThread | None = None
        self._stop = threading.Event()
        self._controllers = threading.Thread(target=self._reconcile_forever, name="fake-k8s-controllers", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def configuration(self) -> Any:
        from kubernetes import client

        configuration = client.Configuration()
        configuration.host = self.url
        configuration.api_key = {"authorization": "Bearer fake-token"}
        return configuration

    def kubeconfig(self, path: Path, namespace: str = "default") -> Path:
        """A kubeconfig file for this cluster (for `alight controller` in a subprocess)."""
        import yaml

        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "fake", "user": {"token": "fake-token"}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake", "namespace": namespace}}],
            "current-context": "fake",
        }
        path.write_text(yaml.safe_dump(config))
        return path

    # lifecycle

    def start(self) -> FakeCluster:
        self._controllers.start()
        self.up()
        return self

    def close(self) -> None:
        self.down()
        self._stop.set()
        self._controllers.join(timeout=5)
        for run in list(self.runs.values()):
            run.stop.set()
            run._signal(__import__("signal").SIGKILL)

    def __enter__(self) -> FakeCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def up(self) -> None:
        """Serve the API (again, on the same port)."""
        self._server = ServerThread(
            create_api(self), port=self.port, log_level="critical"
        )  # cut watches log tracebacks
        self._server.start()

    def down(self) -> None:
        """Stop answering: open watches are cut and new connections are refused; the node keeps running."""
        self.drop_watches()
        if self._server is not None:
            self._server.server.force_exit = True  # no graceful drain: gone now, as a crashed API server is
            self._server.stop()
            self._server = None

    def drop_watches(self) -> None:
        """Break every open watch connection mid-stream (no final chunk), as a network blip does."""
        with self.store.changed:
            self.watch_generation += 1
            self.store.changed.notify_all()

    # objects, for the API and for tests

    def job_pods(self, namespace: str, job_name: str) -> list[Obj]:
        return self.store.list("pods", namespace, f"job-name={job_name}")[0]

    def names(self, kind: str, namespace: str = "default") -> list[str]:
        return sorted(o["metadata"]["name"] for o in self.store.list(kind, namespace)[0])

    def delete(self, kind: str, namespace: str, name: str, propagation: str = "Background") -> Obj:
        """What DELETE does: Pods end gracefully, Jobs cascade per `propagation`, Secrets go at once."""
        obj = self.store.get(kind, namespace, name)
        if kind == "pods":
            self._delete_pod(namespace, name)
        elif kind == "jobs" and propagation == "Foreground":
            self.store.update(kind, namespace, name, lambda o: o["metadata"].update(deletionTimestamp=now_rfc3339()))
            self.store.update(kind, namespace, name, lambda o: o["metadata"].setdefault("finalizers", []).append(
                "foregroundDeletion"))  # fmt: skip
            for dependent in self._dependents(obj["metadata"]["uid"]):
                self.delete(dependent[0], namespace, dependent[1]["metadata"]["name"])
        elif kind == "jobs" and propagation == "Orphan":
            self.store.remove(kind, namespace, name)
        else:
            self.store.remove(kind, namespace, name)  # Background: the garbage collector takes the dependents
        return obj

    def _dependents(self, uid: str) -> list[tuple[str, Obj]]:
        return [(kind, o) for kind in ("pods", "secrets") for o in self.store.all(kind) if owned_by(o, uid)]

    def _delete_pod(self, namespace: str, name: str) -> None:
        run = self.runs.get((namespace, name))
        if run is None or not run.thread.is_alive():
            self.store.remove("pods", namespace, name)
            return
        self.store.update("pods", namespace, name, lambda o: o["metadata"].update(deletionTimestamp=now_rfc3339()))
        run.stop.set()  # the kubelet stops the container, then pod_gone() removes the object

    def pod_gone(self, namespace: str, name: str, run: PodRun) -> None:
        """The kubelet is done with a Pod: remove it when it was being deleted, else keep it (logs stay readable)."""
        if run.stop.is_set():
            self.store.remove("pods", namespace, name)

    def log(self, namespace: str, name: str, tail_lines: int | None) -> str:
        self.store.get("pods", namespace, name)  # 404 for a Pod that is gone
        run = self.runs.get((namespace, name))
        text = run.log_text() if run is not None else ""
        if tail_lines is not None:
            text = "".join(text.splitlines(keepends=True)[-tail_lines:]) if tail_lines > 0 else ""
        return text

    # what only a node can do

    def _run_of(self, pod_name: str, namespace: str = "default") -> PodRun:
        run = self.runs.get((namespace, pod_name))
        if run is None:
            raise ApiError(404, "NotFound", f'pods "{pod_name}" not found')
        return run

    def oom_kill(self, pod_name: str, namespace: str = "default") -> None:
        self._run_of(pod_name, namespace).inject("OOMKilled")

    def evict(self, pod_name: str, namespace: str = "default") -> None:
        self._run_of(pod_name, namespace).inject("Evicted")

    def lose_node(self, pod_name: str, namespace: str = "default") -> None:
        """The node stops reporting: the Pod is marked failed with a DisruptionTarget, then deleted."""
        run = self._run_of(pod_name, namespace)
        run.inject("NodeLost")
        run.thread.join(timeout=10)
        self.store.remove("pods", namespace, pod_name)

    def compact(self) -> None:
        """Forget the event history (as etcd compaction does): watches resuming from before now get 410 Gone."""
        self.store.compact()

    # the controllers

    def _reconcile_forever(self) -> None:
        while not self._stop.wait(TICK_S):
            for job in self.store.all("jobs"):
                self._reconcile_job(job)
            self._collect_garbage()

    def _reconcile_job(self, job: Obj) -> None:
        meta, spec = job["metadata"], job["spec"]
        namespace, name, uid = meta["namespace"], meta["name"], meta["uid"]
        status = job.get("status") or {}
        pods = [p for p in self.store.all("pods") if owned_by(p, uid)]
        if meta.get("deletionTimestamp"):
            if not self._dependents(uid):
                self.store.remove("jobs", namespace, name)
            return
        if _finished(job):
            ttl = spec.get("ttlSecondsAfterFinished")
            if ttl is not None and time.time() - _epoch(status["completionTime"]) >= ttl:
                self.delete("jobs", namespace, name)
            return
        if not status.get("startTime"):
            self._set_status(job, startTime=now_rfc3339(), active=1)
            self._create_pod(job)
            return
        deadline = spec.get("activeDeadlineSeconds")
        if deadline is not None and time.time() - _epoch(status["startTime"]) >= deadline:
            # As the Job controller does (Kubernetes 1.31+): FailureTarget first, then the Pods go, then Failed.
            self._set_status(job, conditions=[_condition("FailureTarget", "DeadlineExceeded", _DEADLINE_MESSAGE)])
            for pod in pods:
                self.delete("pods", namespace, pod["metadata"]["name"])
            self._finish(job, "Failed", "DeadlineExceeded", _DEADLINE_MESSAGE)
            return
        phases = [(p.get("status") or {}).get("phase") for p in pods]
        if "Succeeded" in phases:
            self._finish(job, "Complete", None, None, succeeded=1)
        elif "Failed" in phases or not pods:  # a Pod that failed, or one deleted from under the Job
            self._finish(job, "Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit", failed=1)

    def _set_status(self, job: Obj, **fields: Any) -> None:
        meta = job["metadata"]
        self.store.update("jobs", meta["namespace"], meta["name"], lambda o: o.setdefault("status", {}).update(fields))

    def _finish(self, job: Obj, type_: str, reason: str | None, message: str | None, **counts: int) -> None:
        added = _condition(type_, reason, message)

        def finish(obj: Obj) -> None:
            status = obj.setdefault("status", {})
            status.update(active=0, conditions=[*(status.get("conditions") or []), added], completionTime=now_rfc3339())
            status.update(counts)

        meta = job["metadata"]
        self.store.update("jobs", meta["namespace"], meta["name"], finish)

    def _create_pod(self, job: Obj) -> None:
        meta, template = job["metadata"], job["spec"]["template"]
        namespace = meta["namespace"]
        name = f"{meta['name']}-{''.join(secrets.choice('bcdfghjklmnpqrstvwxz2456789') for _ in range(5))}"
        labels = {**(template.get("metadata") or {}).get("labels", {})}
        labels.update({"job-name": meta["name"], "controller-uid": meta["uid"]})
        labels["batch.kubernetes.io/job-name"] = meta["name"]
        owner = {"apiVersion": "batch/v1", "kind": "Job", "name": meta["name"], "uid": meta["uid"],
                 "controller": True, "blockOwnerDeletion": True}  # fmt: skip
        pod_meta = {"name": name, "labels": labels, "ownerReferences": [owner]}
        pod_meta["annotations"] = dict((template.get("metadata") or {}).get("annotations") or {})
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": dict(template["spec"]), "status": {}}
        self.store.create("pods", namespace, pod)
        run = PodRun(self, namespace, name)
        self.runs[(namespace, name)] = run
        run.thread.start()

    def _collect_garbage(self) -> None:
        uids = self.store.uids()
        for kind in ("pods", "secrets"):
            for obj in self.store.all(kind):
                refs = obj["metadata"].get("ownerReferences") or []
                if (
                    refs
                    and not any(r.get("uid") in uids for r in refs)
                    and not obj["metadata"].get("deletionTimestamp")
                ):
                    self.delete(kind, obj["metadata"]["namespace"], obj["metadata"]["name"])
