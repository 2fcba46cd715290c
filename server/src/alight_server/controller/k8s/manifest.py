"""An attempt's Job and its token Secret, from the user's Job template and what alight owns.

The template's placeholders, what alight sets over it, the least privilege it fills in where the template is
silent, and the values that travel only in the Secret: docs/controller.md, "What an attempt's Job looks like".
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from alight import envvars
from alight.schemas import AttemptStart, attempt_handle
from alight_server.controller.k8s import names
from alight_server.controller.k8s.models import check_object

PLACEHOLDERS = ("image", "command", "job_name", "namespace", "rollout_id", "attempt")
PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
AGENT_CONTAINER = "agent"
SECRET_KEYS = {  # container variable -> key in the attempt's Secret
    envvars.ALIGHT_TOKEN: "token",
    envvars.OPENAI_API_KEY: "token",
    envvars.ANTHROPIC_API_KEY: "token",
    envvars.OTEL_EXPORTER_OTLP_TRACES_HEADERS: "otlp-headers",
}
TASK_KEY = "task"  # a task over the inline limit travels in the Secret too
DEFAULT_TEMPLATE: dict[str, Any] = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "spec": {"template": {"spec": {"containers": [{"name": AGENT_CONTAINER, "image": "{{ image }}",
                                                   "command": "{{ command }}"}]}}},
}  # fmt: skip


def _substitute(node: Any, values: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        return {k: _substitute(v, values) for k, v in node.items()}
    if isinstance(node, list):
        return [_substitute(v, values) for v in node]
    if isinstance(node, str):
        if whole := PLACEHOLDER.fullmatch(node.strip()):
            return values[whole.group(1)]  # keeps lists (command) and numbers as they are
        return PLACEHOLDER.sub(lambda m: str(values[m.group(1)]), node)
    return node


@dataclass(frozen=True)
class JobTemplate:
    body: dict[str, Any]

    @classmethod
    def load(cls, path: str | Path) -> JobTemplate:
        """Parse the template file; ValueError (one sentence naming what to fix) unless it is exactly one Job."""
        import yaml

        try:
            docs = [d for d in yaml.safe_load_all(Path(path).read_text()) if d is not None]
        except (OSError, yaml.YAMLError) as exc:
            raise ValueError(f"cannot read the Job template {path}: {exc}") from exc
        if len(docs) != 1 or not isinstance(docs[0], dict):
            raise ValueError(f"the Job template {path} must hold exactly one YAML document (a Job); found {len(docs)}")
        return cls.parse(docs[0], str(path))

    @classmethod
    def parse(cls, body: dict[str, Any], where: str = "the Job template") -> JobTemplate:
        if (body.get("apiVersion"), body.get("kind")) != ("batch/v1", "Job"):
            raise ValueError(
                f"{where} must be apiVersion batch/v1, kind Job; got {body.get('apiVersion')}, {body.get('kind')}"
            )
        if unknown := sorted({m.group(1) for m in PLACEHOLDER.finditer(str(body))} - set(PLACEHOLDERS)):
            raise ValueError(f"{where} uses unknown placeholder(s) {unknown}; the known ones are {list(PLACEHOLDERS)}")
        template = cls(body)
        if not _pod_spec(template.body).get("containers"):
            raise ValueError(f"{where} has no containers under spec.template.spec.containers")
        return template

    def render(self, values: dict[str, Any]) -> dict[str, Any]:
        return _substitute(copy.deepcopy(self.body), values)


def _pod_spec(job: dict[str, Any]) -> dict[str, Any]:
    return job.setdefault("spec", {}).setdefault("template", {}).setdefault("spec", {})


def agent_container(job: dict[str, Any]) -> dict[str, Any]:
    containers = _pod_spec(job).get("containers") or []
    return next((c for c in containers if c.get("name") == AGENT_CONTAINER), containers[0])


@dataclass(frozen=True)
class JobSettings:
    """What the runner adds to every Job, whatever the template says."""

    runner_name: str
    namespace: str
    image: str | None = None  # used when the rollout's runner spec names none
    ttl_after_finished_s: int = 3600
    termination_grace_s: int = 5  # unless the template sets terminationGracePeriodSeconds
    run_as_user: int = 10001  # the agent image's user (deploy/images/agent.Dockerfile); unless the template sets one
    requests: tuple[tuple[str, str], ...] = (("cpu", "500m"), ("memory", "1Gi"))  # when nothing sets resources
    limits: tuple[tuple[str, str], ...] = (("cpu", "2"), ("memory", "2Gi"))  # for a resource no limit names
    workspace_size: str = "4Gi"  # the emptyDir at /workspace
    tmp_size: str = "1Gi"  # the emptyDir at /tmp


WORKSPACE = "/workspace"


def build_job(
    template: JobTemplate,
    start: AttemptStart,
    settings: JobSettings,
    server_url: str,
    host_env: Mapping[str, str] | None = None,
) -> tuple[dict[str, Any], dict[str, str]]:
    """(the Job, the Secret's stringData) for one attempt; ValueError when the runner spec cannot be rendered.

    `host_env` is the controller's environment: only the names the spec's `inherit_env` lists are taken from it.
    """
    rollout, attempt = start.rollout, start.attempt
    spec = rollout.runner
    if spec is None:
        raise ValueError(f"rollout {rollout.id!r} has no runner spec; create it with runner={{'image': ..., ...}}")
    name = names.job_name(settings.runner_name, rollout.id, attempt)
    argv = envvars.agent_argv(spec, "python") if (spec.entrypoint or spec.command) else None
    values = {"image": spec.image or settings.image, "command": argv, "job_name": name,
              "namespace": settings.namespace, "rollout_id": rollout.id, "attempt": attempt}  # fmt: skip
    job = template.render(values)
    container = agent_container(job)
    if not container.get("image"):
        raise ValueError(f"rollout {rollout.id!r}: no image; set runner.image, the runner's --image, or the template's")
    if not container.get("command") and not container.get("args") and argv is None:
        raise ValueError(f"rollout {rollout.id!r}: no command; set runner.entrypoint or runner.command")
    if spec.cwd:
        container["workingDir"] = spec.cwd
    if spec.resources:
        container["resources"] = copy.deepcopy(spec.resources)

    labels = names.attempt_labels(settings.runner_name, rollout.id, attempt)
    annotations = {names.HANDLE_ANNOTATION: attempt_handle(settings.runner_name, rollout.id, attempt)}
    meta = job.setdefault("metadata", {})
    meta.update(name=name, namespace=settings.namespace)
    meta["labels"] = {**(meta.get("labels") or {}), **labels}
    meta["annotations"] = {**(meta.get("annotations") or {}), **annotations}
    job["spec"].update(
        backoffLimit=0,
        activeDeadlineSeconds=max(1, math.ceil(rollout.timeout_s)),
        ttlSecondsAfterFinished=settings.ttl_after_finished_s,
    )
    pod_meta = job["spec"]["template"].setdefault("metadata", {})
    pod_meta["labels"] = {**(pod_meta.get("labels") or {}), **labels}
    pod_spec = _pod_spec(job)
    pod_spec["restartPolicy"] = "Never"
    pod_spec.setdefault("terminationGracePeriodSeconds", settings.termination_grace_s)
    _least_privilege(pod_spec, container, settings)

    given = {**envvars.inherited_env(host_env or {}, spec.inherit_env, defaults=False), **spec.env}
    secret_data = _set_env(container, start, given, server_url, name)
    return job, secret_data


def _least_privilege(pod_spec: dict[str, Any], container: dict[str, Any], settings: JobSettings) -> None:
    """Fill each field the template leaves unset with its least-privilege value (docs/controller.md)."""
    pod_spec.setdefault("automountServiceAccountToken", False)
    pod_security = pod_spec.setdefault("securityContext", {})
    pod_security.setdefault("runAsNonRoot", True)
    pod_security.setdefault("runAsUser", settings.run_as_user)
    pod_security.setdefault("runAsGroup", settings.run_as_user)
    pod_security.setdefault("fsGroup", settings.run_as_user)  # the emptyDirs are the agent's to write
    pod_security.setdefault("seccompProfile", {"type": "RuntimeDefault"})
    security = container.setdefault("securityContext", {})
    security.setdefault("allowPrivilegeEscalation", False)
    security.setdefault("privileged", False)
    security.setdefault("readOnlyRootFilesystem", True)
    security.setdefault("capabilities", {}).setdefault("drop", ["ALL"])

    mounts = container.setdefault("volumeMounts", [])
    volumes = pod_spec.setdefault("volumes", [])
    for volume, path, size in (("alight-workspace", WORKSPACE, settings.workspace_size),
                               ("alight-tmp", "/tmp", settings.tmp_size)):  # fmt: skip
        if any(m.get("mountPath") == path for m in mounts):
            continue  # the template mounts its own volume there
        volumes.append({"name": volume, "emptyDir": {"sizeLimit": size}})
        mounts.append({"name": volume, "mountPath": path})
    if not any(e.get("name") == "HOME" for e in container.get("env") or []):
        container.setdefault("env", []).append({"name": "HOME", "value": WORKSPACE})  # a writable home

    resources = container.setdefault("resources", {})
    if not resources.get("requests") and not resources.get("limits"):
        resources["requests"] = dict(settings.requests)
    requests = resources.get("requests") or {}
    limits = resources.setdefault("limits", {})
    for resource, default in settings.limits:
        limits.setdefault(resource, requests.get(resource, default))  # never below what is requested


def env_secret_key(name: str) -> str:
    """The Secret key that carries the given variable `name` (Secret keys allow only [-._a-zA-Z0-9])."""
    if re.fullmatch(r"[-._a-zA-Z0-9]+", name) and len(name) <= 200:
        return f"env.{name}"
    return f"env.sha256-{hashlib.sha256(name.encode()).hexdigest()[:32]}"


def _set_env(
    container: dict[str, Any], start: AttemptStart, spec_env: dict[str, str], server_url: str, secret: str
) -> dict[str, str]:
    """Lay the given variables (inherited and the spec's env) and then the attempt contract over the template's
    env; returns the Secret's data, which holds every value not the template's own."""
    rollout = start.rollout
    task_json_len = len(json.dumps(rollout.task, separators=(",", ":")).encode())
    big_task = task_json_len > envvars.TASK_INLINE_LIMIT
    if big_task:  # never written to a local file: the task goes through the Secret instead
        start = start.model_copy(update={"rollout": rollout.model_copy(update={"task": None})})
    contract = envvars.attempt_env(start, server_url)
    secret_data = {"token": start.token, "otlp-headers": contract[envvars.OTEL_EXPORTER_OTLP_TRACES_HEADERS]}
    from_secret = dict(SECRET_KEYS)
    if big_task:
        secret_data[TASK_KEY] = json.dumps(rollout.task, separators=(",", ":"))
        from_secret[envvars.ALIGHT_TASK] = TASK_KEY
    overridden = set(spec_env) | set(contract)
    env = [e for e in container.get("env") or [] if e.get("name") not in overridden]
    if not any(e.get("name") == "PYTHONUNBUFFERED" for e in env) and "PYTHONUNBUFFERED" not in spec_env:
        env.append({"name": "PYTHONUNBUFFERED", "value": "1"})  # a killed agent's last lines still reach its log
    for key, value in spec_env.items():
        if key not in contract:
            secret_data[env_secret_key(key)] = value
            env.append({"name": key, "valueFrom": {"secretKeyRef": {"name": secret, "key": env_secret_key(key)}}})
    for key, value in contract.items():
        if key in from_secret:
            env.append({"name": key, "valueFrom": {"secretKeyRef": {"name": secret, "key": from_secret[key]}}})
        else:
            env.append({"name": key, "value": value})
    container["env"] = env
    return secret_data


def build_secret(job: dict[str, Any], job_uid: str, data: dict[str, str]) -> dict[str, Any]:
    """The attempt's Secret, owned by its Job: the garbage collector deletes it with the Job."""
    meta = job["metadata"]
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": meta["name"], "uid": job_uid, "controller": False,
             "blockOwnerDeletion": False}  # fmt: skip
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "labels": dict(meta["labels"]),
            "ownerReferences": [owner],
        },
        "type": "Opaque",
        "stringData": data,
    }


def validate_job(job: dict[str, Any]) -> None:
    """ValueError unless the rendered Job is a valid batch/v1 Job as the client models describe it."""
    check_object(job, "V1Job")
