"""Controller test helpers: the scripted agent, attempt starts built by hand, waiting without busy loops."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from alight.schemas import AttemptStart, Mode, RunnerSpec
from alight_testing.attempts import attempt_start

AGENTS = Path(__file__).parent / "agents"
SCRIPTED = [sys.executable, str(AGENTS / "scripted.py")]
AGENT_TAG = "registry.example/alight-agent:test"
AGENT_DIGEST = "sha256:" + "0123456789abcdef" * 4
AGENT_IMAGE = f"registry.example/alight-agent@{AGENT_DIGEST}"  # pinned, as the runner requires by default
REGISTRY = {f"{AGENT_TAG}@{AGENT_DIGEST}"}  # what the fake cluster's registry holds: the tag points at the digest


def k8s_runner(cluster: Any, **options: Any) -> Any:
    """A KubernetesRunner on the fake cluster with test-sized grace, TTL and limits (options override them)."""
    from alight_server.controller.k8s import KubernetesRunner, Limits

    defaults: dict[str, Any] = {
        "termination_grace_s": 1,
        "ttl_after_finished_s": 2,
        "limits": Limits(unschedulable_s=1.0, config_error_s=1.0, settle_s=1.0),
    }
    return KubernetesRunner("default", configuration=cluster.configuration(), **{**defaults, **options})


def wait_until(check: Callable[[], Any], timeout_s: float = 30.0, interval_s: float = 0.05) -> Any:
    """Return check()'s first truthy value, or fail after timeout_s."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout_s}s: {check}")
        time.sleep(interval_s)


def pid_alive(pid: int) -> bool:
    """Alive and not a zombie (an orphan's zombie may linger where PID 1 does not reap)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rindex(")") + 2] not in "ZX"


def make_start(
    rollout_id: str = "r1",
    attempt: int = 1,
    task: Any = None,
    runner: RunnerSpec | None = None,
    timeout_s: float = 30.0,
) -> AttemptStart:
    return attempt_start(
        rollout_id,
        attempt,
        task if task is not None else {},
        mode=Mode.TRAIN,
        runner=runner or RunnerSpec(command=SCRIPTED),
        timeout_s=timeout_s,
        token="alt1.test.token",
        gateway_base_url=f"http://127.0.0.1:9/gw/{rollout_id}/{attempt}/v1",
        otlp_traces_endpoint="http://127.0.0.1:9/v1/traces",
    )


TERMINAL = ("succeeded", "failed", "cancelled")


def create_rollout(admin: httpx.Client, rollout_id: str, task: Any = None, **fields: Any) -> dict[str, Any]:
    """Create one rollout running the scripted agent (unless `runner` is given) through the real API."""
    body = {"id": rollout_id, "task": task or {}, "runner": {"command": SCRIPTED}, **fields}
    response = admin.post("/api/rollouts", json={"rollouts": [body]})
    assert response.status_code in (200, 201), response.text
    return response.json()["rollouts"][0]


def get_rollout(admin: httpx.Client, rollout_id: str) -> dict[str, Any]:
    response = admin.get(f"/api/rollouts/{rollout_id}")
    assert response.status_code == 200, response.text
    return response.json()


def wait_terminal(admin: httpx.Client, rollout_id: str, timeout_s: float = 60.0) -> dict[str, Any]:
    return wait_until(lambda: (r := get_rollout(admin, rollout_id))["state"] in TERMINAL and r, timeout_s)
