"""deploy/kubernetes as kubectl would apply it: every object parses as its `kubernetes` client model, and they fit together.

No cluster runs here: these checks read the files. What they cannot show (that
the images build, that a real API server admits the objects, that a CNI
enforces the NetworkPolicy) is listed in docs/controller.md.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from alight_server.controller.k8s import PERMISSIONS, JobTemplate, names
from alight_server.controller.k8s.manifest import JobSettings, build_job, validate_job
from alight_server.controller.k8s.models import check_object
from alight_server.controller.k8s.preflight import sample_start

KUBE = Path(__file__).parents[2] / "deploy" / "kubernetes"
SECRET = "alight-secrets"
SECRET_KEYS = {"admin-key", "db-url", "postgres-password"}  # what docs/controller.md tells users to create
MODELS = {"Namespace": "V1Namespace", "Service": "V1Service", "Deployment": "V1Deployment",
          "StatefulSet": "V1StatefulSet", "ServiceAccount": "V1ServiceAccount", "Role": "V1Role",
          "RoleBinding": "V1RoleBinding", "NetworkPolicy": "V1NetworkPolicy"}  # fmt: skip


def kustomization() -> dict[str, Any]:
    return yaml.safe_load((KUBE / "kustomization.yaml").read_text())


def objects() -> list[dict[str, Any]]:
    found = []
    for resource in kustomization()["resources"]:
        found.extend(d for d in yaml.safe_load_all((KUBE / resource).read_text()) if d)
    return found


def one(kind: str, name: str) -> dict[str, Any]:
    (found,) = [o for o in objects() if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def test_every_manifest_file_is_in_the_kustomization() -> None:
    listed = set(kustomization()["resources"]) | {f for g in kustomization()["configMapGenerator"] for f in
                                                   (x.split("=")[-1] for x in g["files"])}  # fmt: skip
    assert listed == {p.name for p in KUBE.glob("*.yaml")} - {"kustomization.yaml"}


@pytest.mark.parametrize("obj", objects(), ids=lambda o: f"{o['kind']}/{o['metadata']['name']}")
def test_each_object_parses_as_its_kubernetes_model(obj: dict[str, Any]) -> None:
    check_object(obj, MODELS[obj["kind"]])


def test_the_role_grants_exactly_what_the_runner_uses() -> None:
    rules = one("Role", "alight-controller")["rules"]
    granted = {(group, resource, verb) for r in rules for group in r["apiGroups"] for resource in r["resources"]
               for verb in r["verbs"]}  # fmt: skip
    assert granted == {(g, res, v) for g, res, verbs in PERMISSIONS for v in verbs}
    assert not any(o["kind"] in ("ClusterRole", "ClusterRoleBinding") for o in objects())  # its namespace only


def test_the_controller_runs_as_the_bound_service_account_with_the_mounted_template() -> None:
    binding = one("RoleBinding", "alight-controller")
    assert binding["roleRef"]["name"] == "alight-controller"
    pod = one("Deployment", "alight-controller")["spec"]["template"]["spec"]
    assert binding["subjects"][0]["name"] == pod["serviceAccountName"] == "alight-controller"
    args = pod["containers"][0]["args"]
    assert args[:3] == ["controller", "--runner", "k8s"]
    template_path = Path(args[args.index("--job-template") + 1])
    (mount,) = pod["containers"][0]["volumeMounts"]
    (volume,) = pod["volumes"]
    assert template_path.parent == Path(mount["mountPath"]) and volume["configMap"]["name"] == "alight-job-template"
    generated = {f.split("=")[0] for g in kustomization()["configMapGenerator"] for f in g["files"]}
    assert template_path.name in generated
    assert args[args.index("--namespace") + 1] == kustomization()["namespace"]


def test_every_secret_reference_names_the_documented_secret_and_keys() -> None:
    refs = [e["valueFrom"]["secretKeyRef"] for o in objects() if o["kind"] in ("Deployment", "StatefulSet")
            for c in o["spec"]["template"]["spec"]["containers"] for e in c.get("env", []) if "valueFrom" in e]  # fmt: skip
    assert refs and {r["name"] for r in refs} == {SECRET} and {r["key"] for r in refs} == SECRET_KEYS


def test_the_job_template_renders_to_a_valid_job_whose_pods_the_network_policy_selects() -> None:
    template = JobTemplate.load(KUBE / "job-template.yaml")
    start = sample_start(image=None)  # a rollout that names its own image, as the runner's preflight renders
    job, _ = build_job(template, start, JobSettings("k8s@alight", "alight"), "http://alight-server.alight.svc:8700")
    validate_job(job)
    pod_labels = job["spec"]["template"]["metadata"]["labels"]
    policy = one("NetworkPolicy", "alight-agents")
    assert all(pod_labels.get(k) == v for k, v in policy["spec"]["podSelector"]["matchLabels"].items())
    assert pod_labels[names.ROLE_LABEL] == names.ROLE_AGENT


def test_an_agent_pod_from_the_deployed_template_runs_with_least_privilege() -> None:
    template = JobTemplate.load(KUBE / "job-template.yaml")
    job, secret = build_job(template, sample_start(image=None), JobSettings("k8s@alight", "alight"), "http://s:8700")
    validate_job(job)
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert pod["automountServiceAccountToken"] is False
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == 10001
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["securityContext"] == {"allowPrivilegeEscalation": False, "privileged": False,
                                            "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]}}  # fmt: skip
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounted = {m["mountPath"]: volumes[m["name"]] for m in container["volumeMounts"]}
    assert set(mounted) == {"/workspace", "/tmp"} and all(v["emptyDir"]["sizeLimit"] for v in mounted.values())
    assert len(pod["volumes"]) == 2  # the runner added none over the template's own
    assert set(container["resources"]["limits"]) == {"cpu", "memory"}
    assert "preflight-token" in secret.values() and "preflight-token" not in str(job)


def test_the_agent_image_runs_as_the_user_the_job_template_names() -> None:
    dockerfile = (KUBE.parent / "images" / "agent.Dockerfile").read_text()
    pod = JobTemplate.load(KUBE / "job-template.yaml").body["spec"]["template"]["spec"]
    assert f"USER {pod['securityContext']['runAsUser']}" in dockerfile
    assert JobSettings("k8s@alight", "alight").run_as_user == pod["securityContext"]["runAsUser"]


def test_agents_may_reach_only_the_server_port_and_dns() -> None:
    policy = one("NetworkPolicy", "alight-agents")["spec"]
    assert policy["policyTypes"] == ["Ingress", "Egress"] and policy["ingress"] == []
    server_pod = one("Deployment", "alight-server")["spec"]["template"]
    server_port = server_pod["spec"]["containers"][0]["ports"][0]["containerPort"]
    to_server, to_dns = policy["egress"]  # exactly two rules: nothing else, the internet included
    assert to_server["to"] == [{"podSelector": {"matchLabels": server_pod["metadata"]["labels"]}}]
    assert to_server["ports"] == [{"protocol": "TCP", "port": server_port}]
    assert {p["port"] for p in to_dns["ports"]} == {53}
    (dns_peer,) = to_dns["to"]  # port 53 of cluster DNS only: a second peer (an ipBlock) would open it anywhere
    assert dns_peer["podSelector"]["matchLabels"] == {"k8s-app": "kube-dns"} and "ipBlock" not in dns_peer


def test_the_server_uses_postgresql_and_hands_agents_its_service_address() -> None:
    server = one("Deployment", "alight-server")["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e for e in server["env"]}
    assert env["ALIGHT_DB"]["valueFrom"]["secretKeyRef"]["key"] == "db-url"
    service = one("Service", "alight-server")
    namespace = kustomization()["namespace"]
    assert env["ALIGHT_PUBLIC_URL"]["value"] == f"http://{service['metadata']['name']}.{namespace}.svc:8700"
    assert one("StatefulSet", "alight-postgres")["spec"]["template"]["spec"]["containers"][0]["image"].startswith(
        "postgres:"
    )


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl (with its built-in kustomize) is not installed")
def test_kustomize_renders_the_base_into_valid_objects_in_one_namespace() -> None:
    rendered = subprocess.run(["kubectl", "kustomize", str(KUBE)], capture_output=True, text=True, timeout=60)
    assert rendered.returncode == 0, rendered.stderr
    docs = [d for d in yaml.safe_load_all(rendered.stdout) if d]
    for obj in docs:
        check_object(obj, {**MODELS, "ConfigMap": "V1ConfigMap"}[obj["kind"]])
    namespace = kustomization()["namespace"]
    assert {o["metadata"].get("namespace", namespace) for o in docs if o["kind"] != "Namespace"} == {namespace}
    (config_map,) = [o for o in docs if o["kind"] == "ConfigMap"]
    JobTemplate.parse(yaml.safe_load(config_map["data"]["job.yaml"]))
    (controller,) = [o for o in docs if o["kind"] == "Deployment" and o["metadata"]["name"] == "alight-controller"]
    # kustomize names the ConfigMap with a content hash and rewrites the reference to match
    assert controller["spec"]["template"]["spec"]["volumes"][0]["configMap"]["name"] == config_map["metadata"]["name"]
