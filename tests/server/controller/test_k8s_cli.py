"""`alight controller --runner k8s` as users run it: kubeconfig, namespace, Job template, and the preflight's sentences."""

from __future__ import annotations

import signal
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import httpx
import pytest
from controller_testkit import AGENT_IMAGE, SCRIPTED, create_rollout, wait_terminal
from typer.testing import CliRunner

from alight.cli import app
from alight_server.controller.k8s import kube
from alight_testing.fake_k8s import FakeCluster

ALIGHT = str(Path(sys.executable).parent / "alight")
REPO = Path(__file__).parents[3]


def preflight_of(live_server: Any, cluster: FakeCluster, tmp_path: Path, template: str) -> Any:
    """`alight controller --runner k8s` with this Job template, run in-process (it stops at the preflight)."""
    path = tmp_path / "job.yaml"
    path.write_text(template)
    args = [*k8s_args(live_server, cluster.kubeconfig(tmp_path / "kubeconfig")), "--job-template", str(path)]
    return CliRunner().invoke(app, args)


def k8s_args(live_server: Any, kubeconfig: Path, *more: str) -> list[str]:
    return ["controller", "--server", live_server.url, "--admin-key", live_server.admin_key, "--runner", "k8s",
            "--kubeconfig", str(kubeconfig), "--image", AGENT_IMAGE, *more]  # fmt: skip


def test_controller_command_runs_attempts_as_jobs_from_a_template(
    live_server: Any, admin_client: httpx.Client, cluster: FakeCluster, tmp_path: Path
) -> None:
    template = tmp_path / "job.yaml"
    template.write_text(
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  labels: {team: research}\nspec:\n  template:\n    spec:\n"
        "      containers:\n      - name: agent\n        image: '{{ image }}'\n        command: '{{ command }}'\n"
        "        env: [{name: FROM_TEMPLATE, value: 'job {{ job_name }}'}]\n"
    )
    argv = [ALIGHT, *k8s_args(live_server, cluster.kubeconfig(tmp_path / "kubeconfig")), "--job-template",
            str(template), "--agent-server-url", live_server.url, "--poll-interval", "0.05"]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        create_rollout(admin_client, "cli-k8s", task={"say": "ran in a Job"}, runner={"command": SCRIPTED})
        rollout = wait_terminal(admin_client, "cli-k8s")
        assert rollout["state"] == "succeeded", rollout
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
    finally:
        proc.kill()
    assert proc.stdout is not None
    assert "Jobs in namespace default" in proc.stdout.read()
    (job,) = cluster.store.list("jobs", "default")[0]
    assert job["metadata"]["labels"]["team"] == "research"  # the template's, kept
    env = {e["name"]: e.get("value") for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["FROM_TEMPLATE"] == f"job {job['metadata']['name']}"


def test_preflight_names_a_namespace_that_does_not_exist(
    live_server: Any, cluster: FakeCluster, tmp_path: Path
) -> None:
    args = k8s_args(live_server, cluster.kubeconfig(tmp_path / "kubeconfig"), "--namespace", "nowhere")
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1
    assert "namespace 'nowhere' does not exist; create it (kubectl create namespace nowhere)" in result.output


def test_preflight_names_each_permission_the_service_account_lacks(
    live_server: Any, cluster: FakeCluster, tmp_path: Path
) -> None:
    cluster.denied = {("batch", "jobs", "watch"), ("", "secrets", "create")}
    result = CliRunner().invoke(app, k8s_args(live_server, cluster.kubeconfig(tmp_path / "kubeconfig")))
    assert result.exit_code == 1
    assert "may not watch jobs in namespace 'default'" in result.output
    assert "may not create secrets in namespace 'default'" in result.output
    assert result.output.count("preflight:") == 2


def test_preflight_refuses_a_template_that_is_not_a_valid_job(
    live_server: Any, cluster: FakeCluster, tmp_path: Path
) -> None:
    template = (
        "apiVersion: batch/v1\nkind: Job\nspec:\n  template:\n    spec:\n      containers:\n"
        "      - name: agent\n        image: '{{ image }}'\n        comand: [python]\n"
    )
    result = preflight_of(live_server, cluster, tmp_path, template)
    assert result.exit_code == 1
    assert "unknown field(s) spec.template.spec.containers[0].comand" in result.output


def test_a_template_with_an_unknown_placeholder_is_refused(
    live_server: Any, cluster: FakeCluster, tmp_path: Path
) -> None:
    template = (
        "apiVersion: batch/v1\nkind: Job\nspec: {template: {spec: {containers: [{name: a, image: '{{ img }}'}]}}}\n"
    )
    result = preflight_of(live_server, cluster, tmp_path, template)
    assert result.exit_code == 1 and "unknown placeholder(s) ['img']" in result.output


def test_the_extra_named_in_the_missing_client_error_exists_and_installs_kubernetes() -> None:
    extras = tomllib.loads((REPO / "server" / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert f"alight-server[{kube.EXTRA}]" in kube.INSTALL_HINT
    assert any(dep.startswith("kubernetes") for dep in extras[kube.EXTRA])


def test_a_missing_kubernetes_client_fails_with_the_pip_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "kubernetes", None)  # what `import kubernetes` sees when it is not installed
    with pytest.raises(ImportError, match=r"pip install 'alight-server\[k8s\]'"):
        kube.kubernetes_client()
