"""An attempt's Job as the Kubernetes runner builds it: names, labels, what alight owns over the template, the Secret."""

from __future__ import annotations

import json
import re

import pytest
from controller_testkit import make_start

from alight import envvars
from alight.schemas import RunnerSpec
from alight_server.controller.k8s import manifest, names
from alight_server.controller.k8s.manifest import JobSettings, JobTemplate, build_job, validate_job

DNS_1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
SETTINGS = JobSettings("k8s@default", "default", image="agent:1", ttl_after_finished_s=60, termination_grace_s=3)
SERVER = "http://alight.alight.svc:8700"


def test_job_names_are_valid_dns_labels_of_at_most_63_chars_for_any_rollout_id() -> None:
    for rollout_id in ["r1", "Run.With:Colons", "x" * 200, "...", "-_-", "UPPER-case-" + "9" * 80]:
        name = names.job_name("k8s@default", rollout_id, 12)
        assert DNS_1123_LABEL.match(name) and len(name) <= 63, name


def test_job_names_are_deterministic_and_differ_for_ids_that_read_the_same() -> None:
    assert names.job_name("k8s@a", "Run.1", 1) == names.job_name("k8s@a", "Run.1", 1)
    assert names.job_name("k8s@a", "Run.1", 1) != names.job_name("k8s@a", "run-1", 1)
    assert names.job_name("k8s@a", "r", 1) != names.job_name("k8s@b", "r", 1)  # two controllers, one namespace
    assert names.job_name("k8s@a", "r", 1) != names.job_name("k8s@a", "r", 2)


def test_label_values_are_valid_for_any_rollout_id() -> None:
    for text in ["ok-1", "has:colon", "y" * 100, "k8s@default"]:
        value = names.label_value(text)
        assert len(value) <= 63 and re.fullmatch(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?", value), value
    assert names.label_value("ok-1") == "ok-1"


def test_alight_owns_retries_deadline_ttl_and_restart_policy_whatever_the_template_says() -> None:
    template = JobTemplate.parse({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "mine", "labels": {"team": "r"}},
        "spec": {"backoffLimit": 6, "activeDeadlineSeconds": 99999, "template": {"spec": {
            "restartPolicy": "OnFailure", "containers": [{"name": "agent", "image": "{{ image }}", "command": "{{ command }}"}]}}},
    })  # fmt: skip
    start = make_start("own-1", attempt=2, runner=RunnerSpec(entrypoint="agent.py:main"), timeout_s=90.5)
    job, _ = build_job(template, start, SETTINGS, SERVER)
    validate_job(job)
    assert job["metadata"]["name"] == names.job_name("k8s@default", "own-1", 2)
    assert job["metadata"]["labels"]["team"] == "r" and job["metadata"]["labels"][names.ATTEMPT_LABEL] == "2"
    assert job["spec"]["backoffLimit"] == 0 and job["spec"]["activeDeadlineSeconds"] == 91
    assert job["spec"]["ttlSecondsAfterFinished"] == 60
    pod = job["spec"]["template"]
    assert pod["spec"]["restartPolicy"] == "Never" and pod["metadata"]["labels"][names.ROLE_LABEL] == "agent"
    assert pod["spec"]["containers"][0]["command"] == ["python", "-m", "alight.entry", "agent.py:main"]


def test_the_attempt_contract_wins_over_spec_and_template_env() -> None:
    template = JobTemplate.parse(manifest.DEFAULT_TEMPLATE | {})
    spec = RunnerSpec(command=["run"], env={"ALIGHT_ROLLOUT_ID": "spoofed", "MINE": "1"})
    job, secret = build_job(template, make_start("env-1", runner=spec, task={"q": 1}), SETTINGS, SERVER)
    env = {e["name"]: e for e in manifest.agent_container(job)["env"]}
    assert env["ALIGHT_ROLLOUT_ID"]["value"] == "env-1" and secret[manifest.env_secret_key("MINE")] == "1"
    assert env["OPENAI_BASE_URL"]["value"] == f"{SERVER}/gw/env-1/1/v1"
    assert json.loads(env["ALIGHT_TASK"]["value"]) == {"q": 1}
    assert env["ALIGHT_TOKEN"]["valueFrom"]["secretKeyRef"] == {"name": job["metadata"]["name"], "key": "token"}
    assert secret["token"] == "alt1.test.token" and "alt1.test.token" not in json.dumps(job)


def test_a_task_over_the_inline_limit_travels_in_the_secret() -> None:
    task = {"text": "x" * (envvars.TASK_INLINE_LIMIT + 10)}
    job, secret = build_job(
        JobTemplate.parse(manifest.DEFAULT_TEMPLATE), make_start("big", task=task), SETTINGS, SERVER
    )
    env = {e["name"]: e for e in manifest.agent_container(job)["env"]}
    assert env["ALIGHT_TASK"]["valueFrom"]["secretKeyRef"]["key"] == manifest.TASK_KEY
    assert json.loads(secret[manifest.TASK_KEY]) == task and "ALIGHT_TASK_FILE" not in env


def test_a_rollout_with_no_image_anywhere_cannot_be_built() -> None:
    settings = JobSettings("k8s@default", "default")
    with pytest.raises(ValueError, match=r"no image; set runner\.image"):
        build_job(JobTemplate.parse(manifest.DEFAULT_TEMPLATE), make_start("noimg"), settings, SERVER)


def test_a_template_with_two_documents_is_refused(tmp_path: pytest.TempPathFactory) -> None:
    path = tmp_path / "two.yaml"  # type: ignore[operator]
    path.write_text("apiVersion: batch/v1\nkind: Job\n---\napiVersion: batch/v1\nkind: Job\n")
    with pytest.raises(ValueError, match="exactly one YAML document"):
        JobTemplate.load(path)


def test_runner_env_values_travel_in_the_secret_never_in_the_job() -> None:
    spec = RunnerSpec(command=["run"], env={"HF_TOKEN": "hf_s3cr3t", "odd name/with:chars": "v2"})
    job, secret = build_job(JobTemplate.parse(manifest.DEFAULT_TEMPLATE), make_start("sec-1", runner=spec), SETTINGS,
                            SERVER)  # fmt: skip
    validate_job(job)
    env = {e["name"]: e for e in manifest.agent_container(job)["env"]}
    for name, value in spec.env.items():
        ref = env[name]["valueFrom"]["secretKeyRef"]
        assert ref["name"] == job["metadata"]["name"] and secret[ref["key"]] == value
        assert re.fullmatch(r"[-._a-zA-Z0-9]+", ref["key"])  # what the API accepts as a Secret key
    assert "hf_s3cr3t" not in json.dumps(job) and "v2" not in json.dumps(job)


def test_only_the_controller_variables_a_spec_names_reach_its_job() -> None:
    host = {"PATH": "/controller/bin", "HF_TOKEN": "hf_1", "AWS_REGION": "eu", "AWS_SECRET_ACCESS_KEY": "aws_2",
            "ALIGHT_ADMIN_KEY": "alk_3", "WANDB_API_KEY": "w_4"}  # fmt: skip
    spec = RunnerSpec(command=["run"], inherit_env=["HF_TOKEN", "AWS_*", "*ADMIN*"])
    job, secret = build_job(JobTemplate.parse(manifest.DEFAULT_TEMPLATE), make_start("inh-1", runner=spec), SETTINGS,
                            SERVER, host)  # fmt: skip
    names_in_job = {e["name"] for e in manifest.agent_container(job)["env"]}
    assert {"HF_TOKEN", "AWS_REGION", "AWS_SECRET_ACCESS_KEY"} <= names_in_job
    assert not names_in_job & {"PATH", "ALIGHT_ADMIN_KEY", "WANDB_API_KEY"}  # the image keeps its own PATH
    assert "alk_3" not in json.dumps(secret) and "w_4" not in json.dumps(secret)
    assert secret[manifest.env_secret_key("AWS_SECRET_ACCESS_KEY")] == "aws_2"


def test_an_agent_pod_gets_least_privilege_from_the_default_template() -> None:
    job, _ = build_job(JobTemplate.parse(manifest.DEFAULT_TEMPLATE), make_start("lp-1"), SETTINGS, SERVER)
    validate_job(job)
    pod = job["spec"]["template"]["spec"]
    container = manifest.agent_container(job)
    assert pod["automountServiceAccountToken"] is False
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    security = container["securityContext"]
    assert security["allowPrivilegeEscalation"] is False and security["privileged"] is False
    assert security["readOnlyRootFilesystem"] is True and security["capabilities"] == {"drop": ["ALL"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: volumes[m["name"]] for m in container["volumeMounts"]}
    assert mounts["/workspace"]["emptyDir"]["sizeLimit"] and mounts["/tmp"]["emptyDir"]["sizeLimit"]
    assert {e["name"]: e.get("value") for e in container["env"]}["HOME"] == "/workspace"  # writable
    assert set(container["resources"]["limits"]) >= {"cpu", "memory"} and container["resources"]["requests"]


def test_a_limit_the_template_leaves_out_is_never_below_its_request() -> None:
    template = JobTemplate.parse({
        "apiVersion": "batch/v1", "kind": "Job", "spec": {"template": {"spec": {"containers": [{
            "name": "agent", "image": "{{ image }}", "command": "{{ command }}",
            "resources": {"requests": {"cpu": "8", "memory": "64Gi"}, "limits": {"memory": "80Gi"}}}]}}},
    })  # fmt: skip
    job, _ = build_job(template, make_start("res-1"), SETTINGS, SERVER)
    validate_job(job)
    resources = manifest.agent_container(job)["resources"]
    assert resources["limits"] == {"cpu": "8", "memory": "80Gi"} and resources["requests"]["cpu"] == "8"


def test_a_template_mounting_its_own_workspace_keeps_it() -> None:
    template = JobTemplate.parse({
        "apiVersion": "batch/v1", "kind": "Job", "spec": {"template": {"spec": {
            "volumes": [{"name": "work", "persistentVolumeClaim": {"claimName": "w"}}],
            "containers": [{"name": "agent", "image": "{{ image }}", "command": "{{ command }}",
                            "volumeMounts": [{"name": "work", "mountPath": "/workspace"}]}]}}},
    })  # fmt: skip
    job, _ = build_job(template, make_start("ws-1"), SETTINGS, SERVER)
    validate_job(job)
    container = manifest.agent_container(job)
    assert [m["name"] for m in container["volumeMounts"] if m["mountPath"] == "/workspace"] == ["work"]
    assert {m["mountPath"] for m in container["volumeMounts"]} == {"/workspace", "/tmp"}
