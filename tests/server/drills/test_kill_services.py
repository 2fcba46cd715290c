"""kill -9 of `alight serve`, `alight controller` or the inference server while agents run, then a restart.

Real processes: `alight serve` (SQLite, and PostgreSQL when the test run started one), `alight
controller --runner local`, drill agents whose model calls go through the gateway to a vLLM-shaped
upstream (for the inference drill, `python -m alight_server.inference` on the tiny model). After the
restart every rollout must finish, nothing an agent was answered may be missing, an attempt lost as
infra must be retried, and no agent process may be left.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from drill_kit import AGENTS, BIN, agent_pids, assert_settled, group_alive, kill_9, start, stop, wait_for

from alight.schemas import TERMINAL_STATES
from alight_server.stacks.server_thread import ServerThread, free_port
from alight_server.store.keys.kek import KekSource
from alight_testing.fake_upstream import create_fake_upstream

pytestmark = pytest.mark.timeout(600)
KEY = "drill-admin-key"
ROLLOUTS = 3  # with --concurrency 3 all run at once: the kill finds agents mid-call and mid-pause


class Services:
    """`alight serve` and `alight controller` as processes that a drill can kill and start again."""

    def __init__(self, tmp_path: Path, db_url: str, upstream: str) -> None:
        self.tmp_path, self.db_url, self.upstream = tmp_path, db_url, upstream
        self.key_dir = tmp_path / "keys"
        self.url = f"http://127.0.0.1:{free_port()}"
        self.logs_dir = tmp_path / "agent-logs"
        self.server: Any = None
        self.controller: Any = None
        self.inference: Any = None
        self.admin = httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=30)
        # Readiness probes, 20 a second while a service starts: one client (httpx.get builds one per call, ~20 ms CPU).
        self.probe = httpx.Client(timeout=1)

    def start_server(self) -> None:
        argv = [str(BIN / "alight"), "serve", "--port", self.url.rsplit(":", 1)[1], "--db", self.db_url,
                "--admin-key", KEY, "--log-level", "warning", "--upstream-key-dir", str(self.key_dir)]  # fmt: skip
        self.server = start(argv, self.tmp_path / "serve.log")
        wait_for(self._ready, "alight serve answers /readyz", 60, self.server, self.tmp_path / "serve.log")

    def _ready(self) -> bool:
        return _answers(self.probe, f"{self.url}/readyz")

    def start_inference(self) -> None:
        """The standalone inference server on the tiny model, at the port the upstream URL names."""
        port = self.upstream.rsplit(":", 1)[1].split("/")[0]
        # Its keys are generated into key_dir at the first start and read back at a restart: the registered
        # api key file stays right.
        argv = [str(BIN / "python"), "-m", "alight_server.inference", "--model", "tiny", "--served-model-name",
                "policy", "--port", port, "--device", "cpu", "--threads", "1", "--key-dir", str(self.key_dir)]  # fmt: skip
        log = self.tmp_path / "inference.log"
        self.inference = start(argv, log)
        health = self.upstream.removesuffix("/v1") + "/health"
        wait_for(lambda: _answers(self.probe, health), "the inference server answers", 180, self.inference, log)

    def start_controller(self) -> None:
        argv = [str(BIN / "alight"), "controller", "--server", self.url, "--admin-key", KEY, "--runner", "local",
                "--logs-dir", str(self.logs_dir), "--poll-interval", "0.2", "--concurrency", str(ROLLOUTS)]  # fmt: skip
        self.controller = start(argv, self.tmp_path / "controller.log")

    def create_rollouts(self, answered: Path, rng: random.Random, max_retries: int) -> list[str]:
        upstream = {"id": "u", "url": self.upstream, "model": "policy"}
        if (self.key_dir / "api.key").exists():  # the standalone inference server's (the fake needs none)
            upstream["api_key_file"] = str(self.key_dir / "api.key")
        self.admin.post("/api/upstreams", json=upstream).raise_for_status()
        items = [
            {"id": f"{answered.parent.name}-d{i}", "task": {"word": "apple", "answered_dir": str(answered), "pause_s": rng.uniform(0.3, 2.5),
                                     "max_retries": max_retries},
             "runner": {"entrypoint": f"{AGENTS / 'drill_agent.py'}:main"}, "max_attempts": 3, "timeout_s": 120}
            for i in range(ROLLOUTS)
        ]  # fmt: skip
        self.admin.post("/api/rollouts", json={"rollouts": items}).raise_for_status()
        return [item["id"] for item in items]

    def wait_all_final(self, ids: list[str]) -> None:
        def final() -> bool:
            try:
                done = self.admin.post("/api/rollouts/wait", json={"ids": ids, "timeout_s": 2}).json()["done"]
            except httpx.TransportError:
                return False
            return len(done) == len(ids) and all(r["state"] in TERMINAL_STATES for r in done)

        wait_for(final, "every rollout is final", 300, log=self.tmp_path / "controller.log")

    def close(self) -> None:
        for proc in (self.controller, self.server, self.inference):
            if proc is not None:
                stop(proc)
        self.admin.close()
        self.probe.close()


def _answers(probe: httpx.Client, url: str) -> bool:
    try:
        return probe.get(url).status_code == 200
    except httpx.TransportError:
        return False


@contextmanager
def services(tmp_path: Path, db_url: str, victim: str) -> Iterator[Services]:
    if victim == "inference":  # a real inference process, which the drill kills and starts again
        running = Services(tmp_path, db_url, f"http://127.0.0.1:{free_port()}/v1")
        try:
            running.start_inference()
            yield running
        finally:
            running.close()
        return
    with ServerThread(create_fake_upstream(model="policy")) as upstream:
        running = Services(tmp_path, db_url, f"{upstream}/v1")
        try:
            yield running
        finally:
            running.close()


def drill(tmp_path: Path, db_url: str, victim: str, rng: random.Random) -> dict[str, Any]:
    answered = tmp_path / "answered"
    answered.mkdir()
    with services(tmp_path, db_url, victim) as s:
        s.start_server()
        s.start_controller()
        # The OpenAI client's backoff caps at 8 s a try: 20 tries outlast an inference restart on a loaded CPU.
        ids = s.create_rollouts(answered, rng, max_retries=20 if victim == "inference" else 8)
        wait_for(lambda: len(agent_pids(s.logs_dir)) >= 2, "agents run", 120, s.controller)
        delay = rng.uniform(0.0, 2.0)
        time.sleep(delay)
        if victim == "server":
            kill_9(s.server)
            s.start_server()
        elif victim == "controller":
            kill_9(s.controller)
            s.start_controller()  # agents outlive `alight controller`: the new one adopts them
        else:
            kill_9(s.inference)
            s.start_inference()  # the gateway and the agents' clients retry through the outage
        s.wait_all_final(ids)
        held = agent_pids(s.logs_dir)
        s.close()
    wait_for(lambda: not any(group_alive(pid) for pid in held), "no agent outlives the drill", 30)
    counts = assert_settled(db_url, answered, KekSource.parse("secret", admin_key=KEY))
    if victim == "inference":
        # Nothing but the upstream died: every agent got its answer after the restart.
        assert counts["succeeded"] == counts["rollouts"], counts
    return {**counts, "delay_s": round(delay, 2)}


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest) -> str:
    return request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "pg_store_url")


@pytest.mark.parametrize("victim", ["server", "controller", "inference"])
def test_a_killed_service_restarts_without_losing_an_answered_call_or_a_rollout(
    tmp_path: Path, db_url: str, victim: str
) -> None:
    if victim != "server" and "postgresql" in db_url:
        pytest.skip(f"the {victim} never touches the store: its fast drill runs on SQLite only (the soak runs both)")
    print(victim, drill(tmp_path, db_url, victim, random.Random()))


@pytest.mark.soak
@pytest.mark.timeout(2400)
@pytest.mark.parametrize("victim", ["server", "controller", "inference"])
def test_ten_service_kills_in_a_row_each_recover(tmp_path: Path, db_url: str, victim: str) -> None:
    rng = random.Random()
    for trial in range(10):
        (tmp_path / f"t{trial}").mkdir()
        print(f"{victim} trial {trial}:", drill(tmp_path / f"t{trial}", db_url, victim, rng))
