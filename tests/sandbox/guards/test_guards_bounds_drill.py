"""The drill: concurrent CLI attempts against a real server stack while one of them tries to fill the disk.

The server (HTTP on loopback, SQLite on this host's disk), the gateway, a vLLM-shaped upstream double and
the controller's local runner start every attempt as `alight train` would; each attempt is the Claude Code
harness with a stand-in CLI (agents/fake_cli.py) that makes one model call through the sandbox's relay. One
attempt then writes 16 MB files until the disk refuses. It must end as a task failure (reward 0, a
`resource_limit` gate, one attempt: no infrastructure retry), while every other attempt is rewarded 1 and
every call the upstream answered is in the store.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from alight.client import AlightClient
from alight.schemas import REWARD_HACKING, UpstreamCreate
from alight_sandbox.guards.rules import RESOURCE_LIMIT
from alight_server.controller.local import LocalRunner
from alight_server.controller.loop import Controller
from alight_server.stacks.server_thread import ServerThread
from alight_server.trajectories.join import build_trajectory
from alight_testing import create_fake_upstream

pytestmark = pytest.mark.timeout(300)
FAKE_CLI = Path(__file__).resolve().parent / "agents" / "fake_cli.py"
HONEST = 4
WORKSPACE_MB = 40


def _rollout(rollout_id: str, prompt: str, workspaces: Path) -> dict[str, Any]:
    env = {
        "ALIGHT_CLAUDE_BIN": str(FAKE_CLI),
        "ALIGHT_WORKSPACE_ROOT": str(workspaces),
        "ALIGHT_SANDBOX_WORKSPACE_MB": str(WORKSPACE_MB),
    }
    task = {"prompt": prompt, "check": "test -s answer.txt"}
    runner = {"entrypoint": "alight_sandbox.harness.claude_code:episode", "env": env}
    return {"id": rollout_id, "task": task, "runner": runner, "max_attempts": 2, "timeout_s": 120}


def _wait_all(client: httpx.Client, ids: list[str], timeout_s: float = 200) -> dict[str, Any]:
    """Each rollout once it ended, read through the server's API (the server answers the whole time)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        rollouts = {i: client.get(f"/api/rollouts/{i}").raise_for_status().json() for i in ids}
        if all(r["state"] in ("succeeded", "failed", "cancelled") for r in rollouts.values()):
            return rollouts
        time.sleep(0.2)
    raise AssertionError(f"rollouts not finished in {timeout_s:g}s")


def test_one_attempt_filling_the_disk_is_stopped_while_the_others_and_the_store_lose_nothing(
    live_server: Any, tmp_path: Path
) -> None:
    upstream = create_fake_upstream(model="policy")
    with ServerThread(upstream) as url:
        live_server.store.add_upstream(UpstreamCreate(id="double", url=url + "/v1", model="policy"))
        admin = AlightClient(live_server.url, admin_key=live_server.admin_key)
        ids = [f"honest-{n}" for n in range(HONEST)]
        items = [_rollout(i, "say hello", tmp_path / "ws") for i in ids]
        items.append(_rollout("filler", "fill the disk", tmp_path / "ws"))
        admin.http.post("/api/rollouts", json={"rollouts": items}).raise_for_status()
        controller = Controller(admin, LocalRunner(tmp_path / "logs"), concurrency=HONEST + 1, poll_interval=0.05)
        controller.start()
        try:
            rollouts = _wait_all(admin.http, [*ids, "filler"])
        finally:
            controller.stop(kill_running=True)
        answered = [c for c in upstream.state.fake.calls if c.path.endswith("/chat/completions")]
    store = live_server.store
    logs = "\n".join(p.read_text()[-2000:] for p in sorted((tmp_path / "logs").rglob("*.log")))
    assert all(rollouts[i]["state"] == "succeeded" for i in [*ids, "filler"]), logs
    assert [build_trajectory(store, i).final_reward for i in ids] == [1.0] * HONEST, logs
    filler = build_trajectory(store, "filler")
    assert (filler.final_reward, len(rollouts["filler"]["attempts"])) == (0.0, 1)  # a task failure: not retried
    gates = [e.payload for e in store.list_events("filler", kind=REWARD_HACKING)]
    assert [g["rule"] for g in gates] == [RESOURCE_LIMIT], gates
    assert f"of {WORKSPACE_MB} MB" in gates[0]["evidence"], gates
    stored = [c for i in [*ids, "filler"] for c in store.list_model_calls(i) if c.response is not None]
    assert len(answered) == len(stored) == HONEST + 1
    kept = sum(f.stat().st_size for f in (tmp_path / "ws").rglob("fill-*.bin"))
    assert kept <= 2 * WORKSPACE_MB * 1024 * 1024  # what the filler left on the host's disk: about the bound
