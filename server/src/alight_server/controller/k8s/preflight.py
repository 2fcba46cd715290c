"""Checks before the Kubernetes runner takes work: namespace, permissions, template, images. One sentence each."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from alight.schemas import AttemptStart, Mode, Rollout, RolloutState, RunnerSpec
from alight_server.controller.k8s import images, manifest
from alight_server.controller.k8s.runner import api_message

if TYPE_CHECKING:
    from alight_server.controller.k8s.runner import KubernetesRunner

# Everything the runner does to the API, and nothing more: deploy/kubernetes/rbac.yaml grants exactly this
# (a test compares the two). (API group, resource, verbs.)
PERMISSIONS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("batch", "jobs", ("create", "get", "list", "watch", "delete")),
    ("", "pods", ("get", "list", "watch")),
    ("", "pods/log", ("get",)),
    ("", "secrets", ("create", "delete")),
)


def sample_start(image: str | None) -> AttemptStart:
    """An attempt as the server would hand one out, to render the template with."""
    now = datetime.now(UTC)
    spec = RunnerSpec(entrypoint="agent.py:main", image=None if image else "example.org/agent:preflight")
    rollout = Rollout(id="preflight", task={"question": "?"}, mode=Mode.TRAIN, group_id=None, runner=spec,
                      timeout_s=600, max_attempts=1, metadata={}, state=RolloutState.RUNNING, policy_version=0,
                      created_at=now, updated_at=now, seq=0)  # fmt: skip
    return AttemptStart(rollout=rollout, attempt=1, token="preflight-token",
                        gateway_base_url="http://alight:8700/gw/preflight/1/v1",
                        otlp_traces_endpoint="http://alight:8700/v1/traces")  # fmt: skip


def preflight(runner: KubernetesRunner) -> list[str]:
    """What stops the runner from working, one sentence each (empty: ready)."""
    namespace = runner.namespace
    try:
        runner.core.read_namespace(namespace, _preload_content=False)
    except Exception as exc:
        status = getattr(exc, "status", None)
        if status == 404:
            return [f"namespace {namespace!r} does not exist; create it (kubectl create namespace {namespace}) "
                    "or pass --namespace"]  # fmt: skip
        if status not in (401, 403):  # a namespaced Role cannot read Namespace objects: that is fine
            return [f"cannot reach the Kubernetes API at {runner.api.configuration.host}: {api_message(exc)}"]
    problems = [
        p for group, resource, verbs in PERMISSIONS for verb in verbs if (p := _denied(runner, group, resource, verb))
    ]
    try:
        job, _ = manifest.build_job(
            runner.template, sample_start(runner.settings.image), runner.settings, "http://alight:8700"
        )
        manifest.validate_job(job)
    except ValueError as exc:
        problems.append(f"the Job template does not render to a valid Job: {exc}")
    for where, image in images.fixed_images(runner.template.body, runner.settings.image):
        try:  # scanned now, so a refused image stops the controller before it creates any Job
            runner.check_image(image, where)
        except (ValueError, images.ImageRefused) as exc:
            problems.append(str(exc))
    return problems


def _denied(runner: KubernetesRunner, group: str, resource: str, verb: str) -> str | None:
    from kubernetes import client

    kind, _, subresource = resource.partition("/")
    attributes = client.V1ResourceAttributes(
        namespace=runner.namespace, verb=verb, group=group, resource=kind, subresource=subresource or None
    )
    review = client.V1SelfSubjectAccessReview(spec=client.V1SelfSubjectAccessReviewSpec(resource_attributes=attributes))
    try:
        answer = client.AuthorizationV1Api(runner.api).create_self_subject_access_review(review)
    except Exception as exc:
        return f"cannot ask whether the service account may {verb} {resource}: {api_message(exc)}"
    if answer.status is not None and answer.status.allowed:
        return None
    return (f"the service account may not {verb} {resource} in namespace {runner.namespace!r}; "
            "apply deploy/kubernetes/rbac.yaml (the alight-controller Role) or grant it")  # fmt: skip
