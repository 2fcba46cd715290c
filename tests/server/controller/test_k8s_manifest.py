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
    assert env["ALIGHT_ROLLOUT_ID"]["value"] == "env-1" and env["MINE"]["value"] == "1"
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
