"""`alight train` whose rollouts run as Kubernetes Jobs: `alight controller --runner k8s` against the fake cluster.

Server, inference and controller are separate processes started as docs/controller.md tells a user;
the fake cluster (in this process, on loopback) runs each Job's container as a subprocess. The
quickstart agent trains two steps on the tiny model, and every rollout must have been a Job.
"""

from __future__ import annotations

import json
import os
import subprocess
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest
import yaml

from alight_server.controller.k8s import names
from alight_testing.fake_k8s import FakeCluster
from alight_testing.services import BIN, process, served_tiny_model
from alight_testing.tiny_run import tiny_run_config

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

AGENT = Path(__file__).parents[3] / "examples" / "quickstart" / "agent.py"
ADMIN_KEY = "k8s-admin-key"
INFERENCE_KEY = "k8s-inference-key"
IMAGE = "registry.example/quickstart-agent@sha256:" + "1" * 64  # pinned, as the runner requires


def write_config(tmp_path: Path) -> Path:
    config = tiny_run_config(
        tmp_path,
        f"{AGENT}:main",  # no image: the controller's --image
        [{"question": "Add 2 and 3.", "answer": 5}, {"question": "Multiply 4 by 6.", "answer": 24}],
        dataset={"val_size": 0},
        tasks_per_step=1,
        rollout_timeout_s=120,
        checkpoint={"every": 0},
        server={"inference_admin_key": INFERENCE_KEY},
        metrics={"tensorboard": False},
    )
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_alight_train_runs_its_rollouts_as_kubernetes_jobs(tmp_path: Path) -> None:
    with ExitStack() as stack:
        cluster = stack.enter_context(FakeCluster(images={IMAGE}))
        services = stack.enter_context(served_tiny_model(tmp_path, ADMIN_KEY, INFERENCE_KEY))
        server, inference, admin = services.server, services.inference, services.admin
        controller = [str(BIN / "alight"), "controller", "--server", server, "--admin-key", ADMIN_KEY,
                      "--runner", "k8s", "--kubeconfig", str(cluster.kubeconfig(tmp_path / "kubeconfig")),
                      "--image", IMAGE, "--job-ttl", "600", "--poll-interval", "0.2", "--kill-on-exit"]  # fmt: skip
        stack.enter_context(process(controller, tmp_path / "controller.log"))

        train = subprocess.run(
            [str(BIN / "alight"), "train", str(write_config(tmp_path)), "--quiet", "--server", server,
             "--inference-url", f"{inference}/v1"],
            capture_output=True, text=True, timeout=240, env={**os.environ, "ALIGHT_ADMIN_KEY": ADMIN_KEY},
        )  # fmt: skip
        logs = "".join(f"\n--- {p.name}\n{p.read_text()[-2000:]}" for p in sorted(tmp_path.glob("*.log")))
        assert train.returncode == 0, train.stdout[-3000:] + train.stderr[-3000:] + logs

        summary = json.loads((tmp_path / "run" / "summary.json").read_text())
        listed = httpx.get(f"{server}/api/rollouts", params={"limit": 100}, headers=admin, timeout=10).json()
        rollouts = listed["rollouts"]
        assert len(rollouts) == 2 * 2 and all(r["state"] == "succeeded" for r in rollouts), logs
        jobs = cluster.store.list("jobs", "default")[0]
        ran = {
            (j["metadata"]["labels"][names.ROLLOUT_LABEL], j["metadata"]["labels"][names.ATTEMPT_LABEL]) for j in jobs
        }
        assert ran == {(r["id"], "1") for r in rollouts}  # one Job per attempt, nothing else ran them
        for rollout in rollouts:
            trajectory = httpx.get(f"{server}/api/rollouts/{rollout['id']}/trajectory", headers=admin, timeout=10)
            calls = trajectory.json()["calls"]
            assert calls and all(c["call"]["response_token_ids"] for c in calls)  # captured through the gateway
            assert rollout["attempts"][0]["runner_handle"].startswith("k8s@default/")
        steps = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
        assert len(steps) == 2 and summary["policy_version"] >= 0
