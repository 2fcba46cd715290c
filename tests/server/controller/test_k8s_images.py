"""Images on the Kubernetes runner: only digests run (unless allowed), each attempt records the digest it ran,
and a scan (a real script here) runs once per digest and refuses before any Job exists.

The real `kubernetes` client against the fake API; `cluster.requests` shows every call the API saw.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import typer
from controller_testkit import (
    AGENT_DIGEST,
    AGENT_IMAGE,
    AGENT_TAG,
    SCRIPTED,
    create_rollout,
    k8s_runner,
    make_start,
    wait_terminal,
)
from typer.testing import CliRunner

from alight.cli import app
from alight.schemas import RunnerSpec
from alight_server.commands.controller import image_settings
from alight_server.controller.base import SpawnError
from alight_server.controller.k8s import ImageScan
from alight_server.controller.k8s.images import ImageRefused, pinned_digest
from alight_server.controller.loop import Controller
from alight_testing.fake_k8s import FakeCluster
from alight_testing.tiny_run import tiny_run_config

Make = Callable[..., Controller]
HEX = "0123456789abcdef" * 4
UNPINNED = [
    "registry.example/alight-agent",  # no tag: latest
    "registry.example/alight-agent:test",
    "registry.example:5000/alight-agent:test",  # a registry's port is not a digest
    "registry.example:5000/alight-agent",
    f"registry.example/alight-agent@sha256:{HEX.upper()}",  # uppercase is not the canonical digest
    f"registry.example/alight-agent@sha256:{HEX[:63]}",  # short
    f"registry.example/alight-agent@sha256:{HEX}0",  # long
    f"registry.example/alight-agent@sha256:{HEX} ",  # whitespace
    f" registry.example/alight-agent@sha256:{HEX}",
    f"registry.example/alight-agent@sha512:{HEX * 2}",
    f"registry.example/alight-agent@{HEX}",
    f"registry.example/alight-agent:sha256:{HEX}",
]
SCANNER = """\
import json, os, sys
image, calls, code = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open(calls, "a") as out:
    out.write(json.dumps({"image": image, "env": sorted(os.environ)}) + "\\n")
print(f"scanned {image}: CVE-2099-0001 CRITICAL" if code else f"scanned {image}: clean")
sys.exit(code)
"""


def scanner(tmp_path: Path, exit_code: int = 0) -> tuple[str, Path]:
    """(an images.scan command running a real script, the file it appends one line to per call)."""
    script, calls = tmp_path / "scanner.py", tmp_path / "scans.jsonl"
    script.write_text(SCANNER)
    return shlex.join([sys.executable, str(script), "{image}", str(calls), str(exit_code)]), calls


def calls_of(calls: Path) -> list[dict[str, Any]]:
    import json

    return [json.loads(line) for line in calls.read_text().splitlines()] if calls.exists() else []


def job_posts(cluster: FakeCluster) -> int:
    return sum(1 for method, path in cluster.requests if method == "POST" and path.endswith("/jobs"))


def controller_args(live_server: Any, cluster: FakeCluster, tmp_path: Path, *more: str) -> list[str]:
    """`alight controller --runner k8s` on the fake cluster, its folder under tmp_path."""
    return ["controller", "--server", live_server.url, "--admin-key", live_server.admin_key, "--runner", "k8s",
            "--kubeconfig", str(cluster.kubeconfig(tmp_path / "kubeconfig")), "--logs-dir", str(tmp_path / "logs"),
            *more]  # fmt: skip


def image_event(admin: httpx.Client, rollout_id: str) -> dict[str, Any]:
    # reveal: a digest's 64 hex digits look like a secret to the redaction of the people's view
    found = admin.get(f"/api/rollouts/{rollout_id}/events", params={"kind": "image", "reveal": "true"}).json()
    (event,) = found["events"] if isinstance(found, dict) else found
    return event["payload"]


def test_an_unpinned_image_is_refused_before_any_job(cluster: FakeCluster) -> None:
    runner = k8s_runner(cluster)  # one runner for every variant: closing one waits out its watches
    try:
        for i, image in enumerate(UNPINNED):
            with pytest.raises(SpawnError, match=r"is not pinned by digest; pin it by digest.*crane digest IMAGE"):
                runner.start(make_start(f"tag-{i}", runner=RunnerSpec(command=SCRIPTED, image=image)))
    finally:
        runner.close()
    assert job_posts(cluster) == 0


@pytest.mark.parametrize("image", [f"registry.example/a@sha256:{HEX}", f"registry.example:5000/a:1@sha256:{HEX}"])
def test_a_digest_is_pinned_also_with_a_tag_or_a_registry_port(cluster: FakeCluster, image: str) -> None:
    assert pinned_digest(image) == f"sha256:{HEX}"  # the digest wins over the tag
    k8s_runner(cluster, image=image).close()  # no ValueError


def test_the_runners_own_tag_is_refused_when_the_runner_is_made(cluster: FakeCluster) -> None:
    with pytest.raises(ValueError, match=r"the runner's --image: image '.*:test' is not pinned.*buildx imagetools"):
        k8s_runner(cluster, image=AGENT_TAG)
    assert cluster.requests == []


def test_a_tag_in_a_rollout_fails_its_attempt_as_infra_without_a_job(
    k8s_controllers: Make, admin_client: httpx.Client, cluster: FakeCluster
) -> None:
    create_rollout(admin_client, "tag-2", runner={"command": SCRIPTED, "image": AGENT_TAG}, max_attempts=1)
    k8s_controllers().start()
    rollout = wait_terminal(admin_client, "tag-2")
    (attempt,) = rollout["attempts"]
    assert (attempt["status"], attempt["failure_kind"]) == ("failed", "infra")
    assert "rollout 'tag-2': image 'registry.example/alight-agent:test' is not pinned" in attempt["message"]
    assert job_posts(cluster) == 0


def test_a_pinned_image_runs_and_its_digest_is_recorded_with_the_attempt(
    k8s_controllers: Make, admin_client: httpx.Client
) -> None:
    create_rollout(admin_client, "pin-1", runner={"command": SCRIPTED, "image": AGENT_IMAGE})
    k8s_controllers().start()
    assert wait_terminal(admin_client, "pin-1")["state"] == "succeeded"
    (recorded,) = image_event(admin_client, "pin-1")["images"]
    assert recorded["image"] == AGENT_IMAGE and recorded["pinned"] is True and recorded["digest"] == AGENT_DIGEST
    assert recorded["image_id"] == AGENT_IMAGE  # what the Pod's containerStatuses say it ran


def test_an_allowed_tag_records_the_digest_the_pod_ran(k8s_controllers: Make, admin_client: httpx.Client) -> None:
    create_rollout(admin_client, "tag-3", runner={"command": SCRIPTED, "image": AGENT_TAG})
    k8s_controllers(runner={"allow_unpinned_images": True}).start()
    assert wait_terminal(admin_client, "tag-3")["state"] == "succeeded"
    (recorded,) = image_event(admin_client, "tag-3")["images"]
    assert recorded["image"] == AGENT_TAG and recorded["pinned"] is False and recorded["digest"] == AGENT_DIGEST


def training_config(tmp_path: Path, **controller: Any) -> Path:
    """A training config file whose `controller:` section is `controller`."""
    raw = tiny_run_config(tmp_path, "agent.py:main", [{"word": "apple"}], controller=controller)
    (tmp_path / "config.yaml").write_text(json.dumps(raw))  # JSON is YAML
    return tmp_path / "config.yaml"


@pytest.mark.parametrize("where", ["flag", "config"])
def test_a_failing_scan_stops_the_controller_before_any_job(
    live_server: Any, cluster: FakeCluster, tmp_path: Path, where: str
) -> None:
    command, calls = scanner(tmp_path, exit_code=1)
    scan = ["--image-scan", command]
    if where == "config":  # `controller.images.scan` in the training config, as a pilot keeps its settings
        scan = ["--config", str(training_config(tmp_path, images={"scan": command}))]
    result = CliRunner().invoke(app, controller_args(live_server, cluster, tmp_path, "--image", AGENT_IMAGE, *scan))
    assert result.exit_code == 1, result.output
    assert f"image '{AGENT_IMAGE}' failed its scan" in result.output and "CVE-2099-0001 CRITICAL" in result.output
    assert len(calls_of(calls)) == 1 and job_posts(cluster) == 0
    assert not (tmp_path / "logs" / "image-scans").exists()  # a failure is never cached


def test_a_tag_given_to_the_controller_stops_it_before_the_kubernetes_api(
    live_server: Any, cluster: FakeCluster, tmp_path: Path
) -> None:
    result = CliRunner().invoke(app, controller_args(live_server, cluster, tmp_path, "--image", AGENT_TAG))
    assert result.exit_code == 1 and f"image '{AGENT_TAG}' is not pinned by digest" in result.output
    assert cluster.requests == []


def test_a_rollout_image_that_fails_its_scan_fails_its_attempt_without_a_job(
    k8s_controllers: Make, admin_client: httpx.Client, cluster: FakeCluster, tmp_path: Path
) -> None:
    command, calls = scanner(tmp_path, exit_code=1)
    create_rollout(admin_client, "scan-bad", runner={"command": SCRIPTED, "image": AGENT_IMAGE}, max_attempts=2)
    k8s_controllers(runner={"image_scan": ImageScan(command)}).start()
    rollout = wait_terminal(admin_client, "scan-bad")
    assert [(a["status"], a["failure_kind"]) for a in rollout["attempts"]] == [("failed", "infra")] * 2
    assert (
        "failed its scan" in rollout["attempts"][0]["message"] and "CVE-2099-0001" in rollout["attempts"][0]["message"]
    )
    assert len(calls_of(calls)) == 1 and job_posts(cluster) == 0  # the retry did not scan again


@pytest.mark.parametrize(
    ("command", "why"),
    [
        ("/nonexistent/scanner image {image}", r"cannot run /nonexistent/scanner: No such file"),
        (f"{shlex.quote(sys.executable)} -c 'import time; time.sleep(30)' {{image}}", r"ran past its 0\.5 s timeout"),
    ],
)
def test_a_scan_that_cannot_finish_refuses_the_image(tmp_path: Path, command: str, why: str) -> None:
    scan = ImageScan(command, timeout_s=0.5, cache_dir=tmp_path)
    with pytest.raises(ImageRefused, match=why):
        scan.check(AGENT_IMAGE, {"PATH": "/usr/bin:/bin"})
    assert list(tmp_path.iterdir()) == []  # nothing cached


def test_a_passing_scan_runs_once_per_digest_and_its_cache_survives_a_second_run(
    k8s_controllers: Make, admin_client: httpx.Client, tmp_path: Path
) -> None:
    command, calls = scanner(tmp_path)
    host_env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "ALIGHT_ADMIN_KEY": "admin-secret"}

    def run(rollout_ids: list[str]) -> None:
        scan = ImageScan(command, timeout_s=30, cache_dir=tmp_path / "image-scans")
        controller = k8s_controllers(runner={"image_scan": scan, "host_env": host_env}).start()
        for rollout_id in rollout_ids:
            create_rollout(admin_client, rollout_id, runner={"command": SCRIPTED, "image": AGENT_IMAGE})
        assert all(wait_terminal(admin_client, r)["state"] == "succeeded" for r in rollout_ids)
        controller.stop()

    run(["scan-1", "scan-2", "scan-3"])
    (call,) = calls_of(calls)
    assert call["image"] == AGENT_IMAGE and "ALIGHT_ADMIN_KEY" not in call["env"]
    assert image_event(admin_client, "scan-3")["images"][0]["scan"]["passed"] is True
    assert (tmp_path / "image-scans" / f"{AGENT_DIGEST.replace(':', '-')}.json").exists()

    run(["scan-4"])  # a second run in the same folder: a new runner, the scan read from the cache
    assert len(calls_of(calls)) == 1
    assert image_event(admin_client, "scan-4")["images"][0]["scan"]["cached"] is True


@pytest.mark.parametrize("command", ["trivy image --exit-code 1", "trivy image '{image}", ""])
def test_a_scan_command_without_its_image_or_unparsable_is_refused_at_load(command: str) -> None:
    with pytest.raises(ValueError, match="--image-scan"):
        ImageScan(command)


def test_the_image_settings_come_from_the_training_config_and_each_flag_overrides_its_key(tmp_path: Path) -> None:
    config = training_config(tmp_path, allow_unpinned_images=True, images={"scan": "scan {image}", "scan_timeout_s": 5})
    assert image_settings(config, False, None, None) == {
        "allow_unpinned_images": True,
        "image_scan": "scan {image}",
        "image_scan_timeout": 5.0,
    }
    flags = image_settings(config, False, "other {image}", 30.0)
    assert (flags["image_scan"], flags["image_scan_timeout"]) == ("other {image}", 30.0)
    assert image_settings(None, False, None, None) == {
        "allow_unpinned_images": False,
        "image_scan": None,
        "image_scan_timeout": 600.0,
    }
    typo = training_config(tmp_path, images={"scna": "scan {image}"})
    with pytest.raises(typer.Exit) as refused:
        image_settings(typo, False, None, None)
    assert refused.value.exit_code == 2
