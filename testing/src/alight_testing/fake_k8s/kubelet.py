"""The fake cluster's kubelet: runs one Pod's container as a local subprocess and publishes its status.

A Pod goes through what a real node reports: `PodScheduled` False with
reason `Unschedulable` when its requests exceed the node; waiting with
`ErrImagePull` then `ImagePullBackOff` (or `InvalidImageName`) for an image
the registry does not hold; `CreateContainerConfigError` while a
`secretKeyRef` names a Secret that does not exist yet; then `Running`, and
`terminated` with the exit code (`Completed` / `Error`); from the pull on,
the container's `imageID` is the digest it ran (`name@sha256:...`), also for
a tag, as a real kubelet reports it. Deleting a Pod sets
its deletionTimestamp, sends SIGTERM, and SIGKILL after its
terminationGracePeriodSeconds. Tests inject what only a node can do: an OOM
kill, an eviction, a lost node.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import re
import signal
import subprocess
import threading
from pathlib import Path
from typing import Any, Protocol

from alight_testing.fake_k8s.objects import Obj, ObjectStore, now_rfc3339

NODE = "fake-node-1"
# A reference docker accepts: lowercase path components, optional tag or digest.
IMAGE_REF = re.compile(r"^[a-z0-9]+([._/-][a-z0-9]+)*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[a-f0-9]{64})?$")
TICK_S = 0.05


def _parts(reference: str) -> tuple[str, str | None, str | None]:
    """(repository, tag, digest) of an image reference; a registry's port is not a tag."""
    name, _, digest = reference.partition("@")
    repository, colon, tag = name.rpartition(":")
    if not colon or "/" in tag:
        repository, tag = name, ""
    return repository, tag or None, digest or None


def pulled_image_id(registry: set[str], image: str) -> str | None:
    """The `name@sha256:...` a pull of `image` gets from the registry, None when it holds no such image.

    The registry holds references: `name:tag@sha256:...` (a tag and the digest it points at), `name@sha256:...`,
    or `name:tag` (its digest then the sha256 of the reference). A digest pulls by digest, the tag ignored; a
    tag (`latest` when none) pulls what it points at.
    """
    repository, tag, digest = _parts(image)
    for held in registry:
        held_repository, held_tag, held_digest = _parts(held)
        held_digest = held_digest or f"sha256:{hashlib.sha256(held.encode()).hexdigest()}"
        if held_repository == repository and (held_digest == digest if digest else held_tag == (tag or "latest")):
            return f"{repository}@{held_digest}"
    return None


class Node(Protocol):
    """What a Pod's run reads of the cluster it runs on (cluster.py's FakeCluster)."""

    store: ObjectStore
    images: set[str]
    node_capacity: dict[str, str]
    workdir: Path
    path: str

    def pod_gone(self, namespace: str, name: str, run: PodRun) -> None: ...


class PodRun:
    """One Pod's life on the fake node, on its own thread."""

    def __init__(self, cluster: Node, namespace: str, name: str) -> None:
        self.cluster, self.namespace, self.name = cluster, namespace, name
        self.stop = threading.Event()  # set when the Pod is being deleted
        self.injected: str | None = None  # OOMKilled | Evicted | NodeLost, set by a test before the kill
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = cluster.workdir / f"{namespace}--{name}.log"
        self.thread = threading.Thread(target=self._run, name=f"fake-kubelet:{name}", daemon=True)
        self.image_id = ""  # the pulled image's digest, once pulled

    # status writes

    def _status(self, **fields: Any) -> Obj | None:
        def mutate(pod: Obj) -> None:
            pod.setdefault("status", {}).update(fields)

        return self.cluster.store.update("pods", self.namespace, self.name, mutate)

    def _container(self, state: dict[str, Any], pod: Obj, ready: bool = False) -> list[dict[str, Any]]:
        container = pod["spec"]["containers"][0]
        return [
            {
                "name": container["name"],
                "image": container.get("image", ""),
                "imageID": self.image_id,
                "ready": ready,
                "restartCount": 0,
            }
            | {"state": state}
        ]

    def _condition(self, type_: str, status: str, reason: str | None = None, message: str | None = None) -> Obj:
        found: Obj = {"type": type_, "status": status, "lastTransitionTime": now_rfc3339()}
        if reason:
            found.update(reason=reason, message=message or "")
        return found

    def _wait_while(self, blocked: Any) -> bool:
        """Sleep until blocked() is false; False when the Pod is being deleted meanwhile."""
        while blocked():
            if self.stop.wait(TICK_S):
                return False
        return True

    # life

    def _run(self) -> None:
        try:
            self._live()
        finally:
            self.cluster.pod_gone(self.namespace, self.name, self)

    def _live(self) -> None:
        pod = self.cluster.store.get("pods", self.namespace, self.name)
        spec = pod["spec"]
        container = spec["containers"][0]
        self._status(phase="Pending", conditions=[self._condition("PodScheduled", "False")])
        if not self._schedulable(spec):
            unschedulable = self._condition(
                "PodScheduled", "False", "Unschedulable", "0/1 nodes are available: 1 Insufficient cpu or memory."
            )
            self._status(conditions=[unschedulable])
            self.stop.wait()
            return
        self.cluster.store.update("pods", self.namespace, self.name, lambda p: p["spec"].update(nodeName=NODE))
        self._status(conditions=[self._condition("PodScheduled", "True")], startTime=now_rfc3339())
        image = container.get("image") or ""
        if not IMAGE_REF.match(image):
            waiting = {
                "waiting": {"reason": "InvalidImageName", "message": f'Failed to apply default image tag "{image}"'}
            }
            self._status(containerStatuses=self._container(waiting, pod))
            self.stop.wait()
            return
        image_id = pulled_image_id(self.cluster.images, image)
        if image_id is None:
            message = f'Failed to pull image "{image}": manifest unknown'
            self._status(
                containerStatuses=self._container({"waiting": {"reason": "ErrImagePull", "message": message}}, pod)
            )
            if self.stop.wait(0.2):
                return
            backoff = {"waiting": {"reason": "ImagePullBackOff", "message": f'Back-off pulling image "{image}"'}}
            self._status(containerStatuses=self._container(backoff, pod))
            self.stop.wait()
            return
        self.image_id = image_id
        env = self._env_until_resolved(container, pod)
        if env is None:
            return
        self._start_and_wait(pod, container, env)

    def _schedulable(self, spec: Obj) -> bool:
        from kubernetes.utils import parse_quantity

        requests = (spec["containers"][0].get("resources") or {}).get("requests") or {}
        capacity = self.cluster.node_capacity
        return all(parse_quantity(requests[k]) <= parse_quantity(capacity[k]) for k in requests if k in capacity)

    def _env_until_resolved(self, container: Obj, pod: Obj) -> dict[str, str] | None:
        """The container's environment once every secretKeyRef resolves (None: deleted while waiting)."""
        while True:
            env, missing = self._resolve_env(container)
            if missing is None:
                return env
            message = f'secret "{missing}" not found'
            waiting = {"waiting": {"reason": "CreateContainerConfigError", "message": message}}
            self._status(containerStatuses=self._container(waiting, pod))
            if self.stop.wait(TICK_S):
                return None

    def _resolve_env(self, container: Obj) -> tuple[dict[str, str], str | None]:
        env: dict[str, str] = {}
        for var in container.get("env") or []:
            ref = (var.get("valueFrom") or {}).get("secretKeyRef")
            if ref is None:
                env[var["name"]] = var.get("value", "")
                continue
            secret = self.cluster.store.objects.get(("secrets", self.namespace, ref["name"]))
            if secret is None or ref["key"] not in (secret.get("data") or {}):
                return env, ref["name"]
            env[var["name"]] = base64.b64decode(secret["data"][ref["key"]]).decode()
        return env, None

    def _start_and_wait(self, pod: Obj, container: Obj, env: dict[str, str]) -> None:
        argv = [*(container.get("command") or []), *(container.get("args") or [])]
        cwd = container.get("workingDir") or str(self.cluster.workdir)
        # What a container image would put on PATH: here, the interpreter running the tests.
        env = {"PATH": self.cluster.path, "HOME": str(self.cluster.workdir), **env}
        with self.log_path.open("ab") as log:
            try:
                self.proc = subprocess.Popen(
                    argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    start_new_session=True,
                )  # fmt: skip
            except OSError as exc:
                message = f"failed to create containerd task: exec: {argv[:1]}: {exc.strerror}"
                term = {"terminated": {"exitCode": 128, "reason": "StartError", "message": message}}
                self._status(phase="Failed", containerStatuses=self._container(term, pod))
                return
        started = now_rfc3339()
        ready = [self._condition("PodScheduled", "True"), self._condition("Ready", "True")]
        running = {"running": {"startedAt": started}}
        self._status(phase="Running", conditions=ready, containerStatuses=self._container(running, pod, ready=True))
        grace = float(pod["spec"].get("terminationGracePeriodSeconds", 30))
        while self.proc.poll() is None:
            if self.stop.wait(TICK_S):
                self._signal(signal.SIGTERM)
                try:
                    self.proc.wait(timeout=grace)
                except subprocess.TimeoutExpired:
                    self._signal(signal.SIGKILL)
                    self.proc.wait()
        self._terminated(pod, self.proc.returncode, started)

    def _terminated(self, pod: Obj, returncode: int, started: str) -> None:
        code = returncode if returncode >= 0 else 128 - returncode  # a signal shows as 128+N in a container
        reason = "Completed" if code == 0 else "Error"
        if self.injected == "OOMKilled":
            reason = "OOMKilled"
        term = {"terminated": {"exitCode": code, "reason": reason, "startedAt": started, "finishedAt": now_rfc3339()}}
        fields: dict[str, Any] = {"phase": "Succeeded" if code == 0 else "Failed"}
        fields["containerStatuses"] = self._container(term, pod)
        if self.injected == "Evicted":
            fields.update(reason="Evicted", message="The node was low on resource: memory.")
            fields["conditions"] = [
                self._condition("DisruptionTarget", "True", "TerminationByKubelet", "Pod was evicted by the kubelet")
            ]
        elif self.injected == "NodeLost":
            fields["conditions"] = [
                self._condition("Ready", "Unknown", "NodeLost", f"Kubelet stopped posting node status ({NODE})."),
                self._condition(
                    "DisruptionTarget", "True", "DeletionByTaintManager", "Taint manager: deleting due to NoExecute"
                ),
            ]
        self._status(**fields)

    def _signal(self, sig: signal.Signals) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):  # the group already ended
                os.killpg(self.proc.pid, sig)

    # what a node does to a Pod on its own

    def inject(self, what: str) -> None:
        """End the running container the way the node would for `what` (OOMKilled, Evicted, NodeLost)."""
        self.injected = what
        self._signal(signal.SIGKILL)

    def log_text(self) -> str:
        path = Path(self.log_path)
        return path.read_text(errors="replace") if path.exists() else ""
