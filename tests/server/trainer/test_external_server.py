"""`alight train` against servers a user started: `alight serve`, an inference server, `alight controller`.

Every piece is its own process, started the way docs/training.md tells a user to. The run must go
through them (no embedded stack), advance the server's policy version, and load its weights into the
separate inference process; its metrics must reach MLflow and W&B through the same code path.
"""

from __future__ import annotations

import json
import os
import subprocess
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from wandb_records import history, read_records

from alight.schemas import TERMINAL_STATES, Mode, Rollout
from alight_testing.services import BIN, process, served_tiny_model
from alight_testing.tiny_run import tiny_run_config

pytestmark = pytest.mark.timeout(300)

AGENT = Path(__file__).parent / "agents" / "tool_agent.py"
ADMIN_KEY = "external-admin-key"
INFERENCE_KEY = "external-inference-key"
PROBE = {"model": "tiny", "messages": [{"role": "user", "content": "Define apple."}], "max_tokens": 6,
         "temperature": 0, "logprobs": True, "return_token_ids": True}  # fmt: skip


def probe(inference: str, auth: dict[str, str]) -> tuple[list[int], list[float]]:
    """A greedy completion straight from the inference server: its token ids and their logprobs."""
    body = httpx.post(f"{inference}/v1/chat/completions", json=PROBE, headers=auth, timeout=60).json()
    choice = body["choices"][0]
    return choice["token_ids"], [round(t["logprob"], 5) for t in choice["logprobs"]["content"]]


def write_config(tmp_path: Path) -> Path:
    config = tiny_run_config(
        tmp_path,
        f"{AGENT}:main",
        [{"word": w} for w in ["apple", "river", "stone"]],
        dataset={"val_size": 0},
        tasks_per_step=1,
        rollout_timeout_s=120,
        checkpoint={"every": 0},
        server={"inference_admin_key": INFERENCE_KEY},  # url and inference_url come as flags
        metrics={
            "tensorboard": False,
            "mlflow": {"tracking_uri": f"sqlite:///{tmp_path / 'mlflow.db'}", "experiment": "external"},
            "wandb": {"project": "alight-tests", "mode": "offline"},
        },
    )
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_alight_train_runs_against_servers_the_user_started(tmp_path: Path) -> None:
    with ExitStack() as stack:
        services = stack.enter_context(served_tiny_model(tmp_path, ADMIN_KEY, INFERENCE_KEY))
        server, inference, admin = services.server, services.inference, services.admin
        controller = [str(BIN / "alight"), "controller", "--server", server, "--admin-key", ADMIN_KEY,
                      "--runner", "local", "--logs-dir", str(tmp_path / "agent-logs"), "--poll-interval", "0.2",
                      "--kill-on-exit"]  # fmt: skip
        stack.enter_context(process(controller, tmp_path / "controller.log"))
        before = probe(inference, services.inference_auth)

        train = subprocess.run(
            [str(BIN / "alight"), "train", str(write_config(tmp_path)), "--quiet", "--server", server,
             "--inference-url", f"{inference}/v1"],
            capture_output=True, text=True, timeout=240,
            env={**os.environ, "ALIGHT_ADMIN_KEY": ADMIN_KEY, "WANDB_SILENT": "true", "WANDB_DIR": str(tmp_path)},
        )  # fmt: skip
        logs = "".join(f"\n--- {p.name}\n{p.read_text()[-2000:]}" for p in sorted(tmp_path.glob("*.log")))
        assert train.returncode == 0, train.stdout[-3000:] + train.stderr[-3000:] + logs

        run_dir = tmp_path / "run"
        summary = json.loads((run_dir / "summary.json").read_text())
        steps = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
        trained_steps = sum(s["train/groups"] > s["train/uniform_groups"] for s in steps)
        assert trained_steps >= 1, f"no step had a group with differing rewards: {steps}"
        assert not (run_dir / "alight.db").exists(), "the embedded stack ran instead of the external one"

        # the server's policy version advanced once per trained step, and the inference process loaded each one
        policy = httpx.get(f"{server}/api/policy", headers=admin, timeout=10).json()
        assert policy["current"] == summary["policy_version"] == trained_steps
        health = httpx.get(f"{inference}/health", timeout=10).json()
        assert health["policy_version"] == trained_steps
        assert probe(inference, services.inference_auth) != before, (
            "the inference process still serves the untrained weights"
        )

        # every rollout ran through the external server and controller: gateway-recorded token ids, agent logs
        listed = httpx.get(f"{server}/api/rollouts", params={"limit": 100}, headers=admin, timeout=10).json()
        rollouts = [Rollout.model_validate(r) for r in listed["rollouts"]]
        assert len(rollouts) == 2 * 2 and all(r.mode == Mode.TRAIN for r in rollouts)
        assert all(r.state in TERMINAL_STATES for r in rollouts)
        versions: dict[int, set[int]] = {}
        for rollout in rollouts:
            path = f"{server}/api/rollouts/{rollout.id}/trajectory"
            trajectory = httpx.get(path, headers=admin, timeout=10).json()
            assert len(trajectory["calls"]) == 2 and all(c["call"]["response_token_ids"] for c in trajectory["calls"])
            versions.setdefault(rollout.metadata["step"], set()).update(
                c["call"]["policy_version"] for c in trajectory["calls"]
            )
            assert list((tmp_path / "agent-logs").rglob(f"*{rollout.id}*")), f"no controller log for {rollout.id}"
        first_trained = int(steps[0]["policy_version"])
        assert versions == {0: {0}, 1: {first_trained}}  # step 2's calls were served by what step 1 pushed

    assert_trackers_got_the_run(tmp_path, steps)


def assert_trackers_got_the_run(tmp_path: Path, steps: list[dict[str, Any]]) -> None:
    """`alight train` wrote the same per-step metrics to MLflow and W&B, with the plot and a redacted config."""
    from mlflow.tracking import MlflowClient

    ids = json.loads((tmp_path / "run" / "tracking.json").read_text())
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    run = client.get_run(ids["mlflow"])
    assert run.info.status == "FINISHED"
    assert run.data.params["server.inference_admin_key"] == "***"  # secrets never reach a tracker
    history_ = {m.step: m.value for m in client.get_metric_history(ids["mlflow"], "train/reward_mean")}
    assert history_ == {s["step"]: s["train/reward_mean"] for s in steps}
    assert [a.path for a in client.list_artifacts(ids["mlflow"])] == ["training.png"]

    (wandb_file,) = (tmp_path / "wandb").glob(f"offline-run-*-{ids['wandb']}/run-{ids['wandb']}.wandb")
    rows = history(read_records(wandb_file))
    assert {step: row["train/reward_mean"] for step, row in rows.items()} == {
        s["step"]: s["train/reward_mean"] for s in steps
    }
