"""Kubernetes runner: each attempt is a Job (plus a Secret with its token), watched, classified and cleaned up.

The Runner verbs map onto the API like this:

    start    refuse an image not pinned by digest, or one its scan refuses (images.py); create the
             Job (deterministic name; 409 AlreadyExists means it is already ours), then the Secret
             owned by it; an unreachable API keeps the attempt pending and retries from poll
    poll     read the watched Job and Pods (see informer.py) and classify them (classify.py)
    kill     delete the Job with foreground propagation (its Pods, then the Job, then the Secret)
    handles  list the Jobs with this runner's labels: a restarted controller adopts them
    release  delete the Job if it still runs, else only its Secret; a finished Job stays
             until ttlSecondsAfterFinished so `kubectl logs` works meanwhile
    log_tail the agent container's log, last lines
    launched the Job's images, their digests (the Pod's imageID for a tag) and scans

Long because: the Runner's verbs over one API client, each with its own retry and pacing; the watch
(informer.py), the classification (classify.py) and the Job's manifest (manifest.py) already live apart.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from collections.abc import Mapping
from typing import Any

from alight.schemas import AttemptStart, attempt_handle, parse_handle
from alight_server.controller.base import RunPhase, RunStatus, SpawnError
from alight_server.controller.k8s import images, manifest, names
from alight_server.controller.k8s.classify import Limits, classify
from alight_server.controller.k8s.informer import Informer
from alight_server.controller.k8s.kube import kubernetes_client

log = logging.getLogger("alight.controller.k8s")

LOG_TAIL_LINES = 5000
CONFIRM_EVERY_S = 1.0  # at most one direct GET per second for a Job the watch has not shown yet
RETRY_EVERY_S = 1.0  # a create or delete the API did not take


def transient(exc: BaseException) -> bool:
    """True for errors worth retrying (unreachable, overloaded, 5xx); False for answers that will not change."""
    status = getattr(exc, "status", None)
    if isinstance(status, int) and status != 0:
        return status == 429 or status >= 500
    return True  # connection refused, reset, timed out: urllib3 errors, OSError


def api_message(exc: BaseException) -> str:
    """The API server's own sentence from a Status body, else the exception's text."""
    body = getattr(exc, "body", None)
    if isinstance(body, str | bytes):
        with contextlib.suppress(TypeError, ValueError, KeyError):
            return str(json.loads(body)["message"])
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


class KubernetesRunner:
    """Runs attempts as Jobs in one namespace; see the module docstring for how each verb maps."""

    def __init__(
        self,
        namespace: str,
        *,
        configuration: Any = None,
        template: manifest.JobTemplate | None = None,
        image: str | None = None,
        name: str | None = None,
        agent_server_url: str | None = None,
        ttl_after_finished_s: int = 3600,
        termination_grace_s: int = 5,
        limits: Limits | None = None,
        creations_per_s: float = 5.0,
        relist_s: float = 300.0,
        watch_timeout_s: int = 240,
        host_env: Mapping[str, str] | None = None,
        allow_unpinned_images: bool = False,
        image_scan: images.ImageScan | None = None,
    ) -> None:
        self.template = template or manifest.JobTemplate.parse(manifest.DEFAULT_TEMPLATE)
        self.allow_unpinned_images = allow_unpinned_images
        self.image_scan = image_scan
        if not allow_unpinned_images:  # the images known now are refused now, before anything starts
            for where, known in images.fixed_images(self.template.body, image):
                images.require_pinned(known, where)
        client = kubernetes_client()
        # Where a spec's inherit_env names are read (the controller's own environment, by default).
        self.host_env = dict(os.environ if host_env is None else host_env)
        self.namespace = namespace
        self.name = name or f"k8s@{namespace}"
        self.api = client.ApiClient(configuration)
        self.batch = client.BatchV1Api(self.api)
        self.core = client.CoreV1Api(self.api)
        self.settings = manifest.JobSettings(self.name, namespace, image, ttl_after_finished_s, termination_grace_s)
        self.agent_server_url = agent_server_url
        self.limits = limits or Limits()
        self.min_create_gap_s = 1.0 / creations_per_s
        selector = names.runner_selector(self.name)
        watch = {"relist_s": relist_s, "watch_timeout_s": watch_timeout_s}
        self.jobs = Informer("jobs", self.batch.list_namespaced_job, namespace, selector, **watch)
        self.pods = Informer("pods", self.core.list_namespaced_pod, namespace, selector, **watch)
        self._lock = threading.Lock()
        self._watching = False
        self._pending: dict[str, AttemptStart] = {}  # created when the API answers again
        self._undeleted: dict[str, str] = {}  # job name -> propagation, for deletes the API did not take
        self._released: set[str] = set()  # job names
        self._waiting_since: dict[str, float] = {}  # "<pod>/<reason>" -> monotonic time first seen
        self._next_try: dict[str, float] = {}  # handle -> monotonic time of the next create/confirm
        self._next_create_at = 0.0

    def handle_for(self, rollout_id: str, attempt: int) -> str:
        return attempt_handle(self.name, rollout_id, attempt)

    def job_name(self, handle: str) -> str:
        _, rollout_id, attempt = parse_handle(handle)
        return names.job_name(self.name, rollout_id, attempt)

    def close(self) -> None:
        """Stop the watches (Jobs keep running; a new runner adopts them)."""
        if self._watching:
            self.jobs.stop()
            self.pods.stop()
        self.api.close()

    def _watch(self) -> None:
        with self._lock:
            if not self._watching:
                self._watching = True
                self.jobs.start()
                self.pods.start()

    def start(self, start: AttemptStart) -> str:
        self._watch()
        handle = self.handle_for(start.rollout.id, start.attempt)
        if self.jobs.get(self.job_name(handle)) is None:
            self._create(handle, start)
        return handle

    def _create(self, handle: str, start: AttemptStart) -> None:
        server_url = self.agent_server_url or start.otlp_traces_endpoint.removesuffix("/v1/traces")
        try:
            job, secret_data = manifest.build_job(self.template, start, self.settings, server_url, self.host_env)
            for _, image in images.job_images(job):
                self.check_image(image, f"rollout {start.rollout.id!r}")
        except (ValueError, images.ImageRefused) as exc:
            raise SpawnError(str(exc)) from exc
        self._pace()
        try:
            created = self._create_job(job)
            owned = manifest.build_secret(job, created["metadata"]["uid"], secret_data)
            self._create_ignoring_conflict(self.core.create_namespaced_secret, owned)
        except Exception as exc:
            if not transient(exc):
                raise SpawnError(f"Kubernetes refused Job {job['metadata']['name']}: {api_message(exc)}") from exc
            self._pending[handle] = start
            self._next_try[handle] = time.monotonic() + RETRY_EVERY_S
            log.warning("cannot create Job %s yet, will retry: %s", job["metadata"]["name"], api_message(exc))
            return
        self._pending.pop(handle, None)
        self.jobs.put(created)
        log.info("created Job %s for %s", job["metadata"]["name"], handle)

    def check_image(self, image: str, where: str) -> None:
        """ValueError unless the image is pinned (or unpinned ones are allowed); ImageRefused when its scan fails."""
        if not self.allow_unpinned_images:
            images.require_pinned(image, where)
        if self.image_scan is not None:
            self.image_scan.check(image, self.host_env)

    def _create_job(self, job: dict[str, Any]) -> dict[str, Any]:
        """The created Job, or the existing one of that name (an earlier try, or an earlier controller)."""
        if (existing := self._create_ignoring_conflict(self.batch.create_namespaced_job, job)) is not None:
            return existing
        response = self.batch.read_namespaced_job(job["metadata"]["name"], self.namespace, _preload_content=False)
        return json.loads(response.data)

    def _create_ignoring_conflict(self, create: Any, body: dict[str, Any]) -> dict[str, Any] | None:
        """create(namespace, body) as JSON; None when the object already exists."""
        try:
            return json.loads(create(self.namespace, body, _preload_content=False).data)
        except Exception as exc:
            if getattr(exc, "status", None) == 409:
                return None
            raise

    def _pace(self) -> None:
        """The creation rate limit: at most one create per min_create_gap_s, so a big claim cannot flood the API."""
        with self._lock:
            now = time.monotonic()
            at = max(now, self._next_create_at)
            self._next_create_at = at + self.min_create_gap_s
        time.sleep(at - now)

    def poll(self, handle: str) -> RunStatus:
        self._watch()
        name = self.job_name(handle)
        if (propagation := self._undeleted.get(name)) is not None:  # a delete the API did not take
            self._delete(name, propagation)
        if (pending := self._pending.get(handle)) is not None:
            if time.monotonic() >= self._next_try.get(handle, 0.0):
                try:
                    self._create(handle, pending)
                except SpawnError as exc:
                    self._pending.pop(handle, None)
                    return RunStatus(RunPhase.FAILED_TO_START, message=str(exc))
            return RunStatus(RunPhase.RUNNING)
        job = self.jobs.get(name)
        if job is None and not self.jobs.is_gone(name):
            job = self._confirm(handle, name)
            if job is None and not self.jobs.is_gone(name):
                return RunStatus(RunPhase.RUNNING)  # not known either way yet (API unreachable)
        live, gone = self.pods.select("job-name", name)
        live.sort(key=lambda p: p["metadata"].get("creationTimestamp") or "", reverse=True)
        return classify(name, job, live, gone, limits=self.limits, waited=self._waited, now=time.time())

    def _confirm(self, handle: str, name: str) -> dict[str, Any] | None:
        """Ask the API directly for a Job the watch has not shown (just created, or adopted before the first list)."""
        if time.monotonic() < self._next_try.get(handle, 0.0):
            return None
        self._next_try[handle] = time.monotonic() + CONFIRM_EVERY_S
        try:
            job = json.loads(self.batch.read_namespaced_job(name, self.namespace, _preload_content=False).data)
        except Exception as exc:
            if getattr(exc, "status", None) == 404:
                self.jobs.mark_gone(name)
            return None
        self.jobs.put(job)
        return job

    def _waited(self, key: str) -> float:
        """Seconds since this runner first saw `key` (a Pod stuck in a waiting reason)."""
        return time.monotonic() - self._waiting_since.setdefault(key, time.monotonic())

    def kill(self, handle: str, grace_s: float) -> None:
        # grace_s is the Pod's terminationGracePeriodSeconds, set when the Job was built.
        self._pending.pop(handle, None)
        self._delete(self.job_name(handle), "Foreground")

    def _delete(self, name: str, propagation: str) -> None:
        try:
            self.batch.delete_namespaced_job(name, self.namespace, propagation_policy=propagation)
        except Exception as exc:
            if getattr(exc, "status", None) != 404:
                log.warning("cannot delete Job %s yet, will retry: %s", name, api_message(exc))
                self._undeleted[name] = propagation
                return
        self._undeleted.pop(name, None)

    def release(self, handle: str) -> None:
        name = self.job_name(handle)
        self._pending.pop(handle, None)
        self._next_try.pop(handle, None)
        self._released.add(name)
        job = self.jobs.get(name)
        conditions = ((job or {}).get("status") or {}).get("conditions") or []
        live, gone = self.pods.select("job-name", name)
        # A pod that ran means the Job did start: the job watch may just lag behind the pod watch.
        ran = any((p.get("status") or {}).get("phase") in ("Running", "Succeeded", "Failed") for p in live + gone)
        if job is not None and not ran and not any(c.get("type") in ("Complete", "Failed") for c in conditions):
            self._delete(name, "Background")  # it never started (image, scheduling): nothing to read later
        else:
            try:  # the token leaves the cluster now; the Job and its Pod stay until their TTL
                self.core.delete_namespaced_secret(name, self.namespace)
            except Exception as exc:
                if getattr(exc, "status", None) != 404:
                    log.warning("cannot delete Secret %s (its Job's TTL will): %s", name, api_message(exc))
        for pod in live + gone:
            self.pods.forget(pod["metadata"]["name"])
            for key in [k for k in self._waiting_since if k.startswith(f"{pod['metadata']['name']}/")]:
                del self._waiting_since[key]
        self.jobs.forget(name)

    def handles(self) -> list[str]:
        response = self.batch.list_namespaced_job(
            self.namespace, label_selector=names.runner_selector(self.name), _preload_content=False
        )
        listed = json.loads(response.data).get("items") or []
        found = {
            j["metadata"]["name"]: (j["metadata"].get("annotations") or {}).get(names.HANDLE_ANNOTATION) for j in listed
        }
        self._released &= set(found)  # a released Job that its TTL removed is forgotten for good
        return sorted({h for n, h in found.items() if h and n not in self._released} | set(self._pending))

    def launched(self, handle: str) -> dict[str, Any] | None:
        """Each container's image, its digest (the reference's, else the one the Pod ran) and its scan."""
        name = self.job_name(handle)
        job = self.jobs.get(name)
        if job is None:
            return None
        live, gone = self.pods.select("job-name", name)
        pod = max(live + gone, key=lambda p: p["metadata"].get("creationTimestamp") or "", default=None)
        return {"handle": handle, "images": images.ran_images(job, pod, self.image_scan)}

    def withheld_env(self, handle: str) -> list[str]:
        # A Pod's environment is its image's and its template's: the controller's own variables are not
        # what it lacked, so there is nothing to compare here.
        return []

    def log_tail(self, handle: str, max_bytes: int) -> str:
        live, gone = self.pods.select("job-name", self.job_name(handle))
        pods = sorted(live + gone, key=lambda p: p["metadata"].get("creationTimestamp") or "", reverse=True)
        for pod in pods:
            containers = (pod.get("spec") or {}).get("containers") or [{}]
            container = next((c for c in containers if c.get("name") == manifest.AGENT_CONTAINER), containers[0])
            try:
                response = self.core.read_namespaced_pod_log(
                    pod["metadata"]["name"],
                    self.namespace,
                    container=container.get("name"),
                    tail_lines=LOG_TAIL_LINES,
                    _preload_content=False,
                )
            except Exception as exc:
                log.info("no log for Pod %s: %s", pod["metadata"]["name"], api_message(exc))
                continue
            data: bytes = response.data
            return data[-max_bytes:].decode("utf-8", errors="replace")
        return ""
