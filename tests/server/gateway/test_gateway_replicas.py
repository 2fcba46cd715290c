"""Gateway replicas on one store (SQLite file, PostgreSQL): one pause for all of them, one drain over all calls.

Replica A is the test's live server; replica B is `alight serve` in its own
process on the same database, as a user scales the gateway out.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from alight.schemas import GatewayReplica
from alight_server.app import create_app
from alight_server.config import ServerConfig
from alight_server.stacks.server_thread import ServerThread, free_port
from alight_server.store.sql import SqlStore
from alight_testing import create_fake_upstream
from tests.conftest import fresh_pg_schema
from tests.server.gateway.conftest import UpstreamUnderTest

ALIGHT = str(Path(sys.executable).parent / "alight")
CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}
ADMIN_KEY = "alk_replicas-admin-key"


@pytest.fixture(scope="module")
def upstream_server() -> Iterator[UpstreamUnderTest]:
    """The fake upstream alone: which backend answers is no part of how replicas pause and drain together."""
    app = create_fake_upstream(model="fake-policy")
    with ServerThread(app) as url:
        yield UpstreamUnderTest("fake", url + "/v1", "fake-policy", app.state.fake)


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def shared_db_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One database per kind for the module: replica B is started on it once and serves every test beside A."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path_factory.mktemp('replicas') / 'shared.db'}"
        return
    with fresh_pg_schema(request.getfixturevalue("pg_url")) as url:
        yield url


@pytest.fixture
def db_url(request: pytest.FixtureRequest, shared_db_url: str, tmp_path: Path) -> str:
    """Replica B's database for the tests beside it; a fresh one of the same kind for those that need no other
    replica on their store."""
    if "replica_b" in request.fixturenames:
        return shared_db_url
    if shared_db_url.startswith("sqlite"):
        return f"sqlite:///{tmp_path / 'shared.db'}"
    return request.getfixturevalue("pg_store_url")


@pytest.fixture
def store(db_url: str) -> Iterator[SqlStore]:
    """Overrides the SQLite-only store: replica A serves from this one."""
    s = SqlStore(db_url)
    yield s
    s.close()


@pytest.fixture
def server_config(db_url: str) -> ServerConfig:
    return ServerConfig(admin_key=ADMIN_KEY, db_url=db_url, port=free_port())


class Replica:
    """`alight serve` on the shared database, stopped the way a user stops it (SIGTERM)."""

    def __init__(self, db_url: str) -> None:
        self.url = f"http://127.0.0.1:{free_port()}"
        port = self.url.rsplit(":", 1)[1]
        args = ["serve", "--port", port, "--db", db_url, "--admin-key", ADMIN_KEY, "--log-level", "warning"]
        self.proc = subprocess.Popen(
            [ALIGHT, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=dict(os.environ)
        )
        deadline = time.monotonic() + 60
        while not self._ready():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.proc.kill()
                pytest.fail(f"alight serve did not come up: {self.proc.communicate()[0]}")
            time.sleep(0.1)
        self.admin = httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {ADMIN_KEY}"}, timeout=30)

    def _ready(self) -> bool:
        try:
            return httpx.get(f"{self.url}/readyz", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    def stop(self) -> None:
        self.admin.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        if self.proc.stdout:
            self.proc.stdout.close()


@pytest.fixture(scope="module")
def _replica_b_slot(shared_db_url: str) -> Iterator[list[Replica]]:
    """Replica B, started once per database (a start is seconds of imports); a test that stops it gets a new one."""
    slot: list[Replica] = []
    yield slot
    for replica in slot:
        replica.stop()


@pytest.fixture
def replica_b(_replica_b_slot: list[Replica], shared_db_url: str) -> Iterator[Replica]:
    if not _replica_b_slot or _replica_b_slot[-1].proc.poll() is not None:
        _replica_b_slot.append(Replica(shared_db_url))
    replica = _replica_b_slot[-1]
    yield replica
    if replica.proc.poll() is None:  # the next test starts with the shared pause lifted
        replica.admin.post("/api/gateway/resume", json={}).raise_for_status()


def _admin(gateway: Any) -> httpx.Client:
    return httpx.Client(base_url=gateway.url, headers=gateway.server.admin_headers(), timeout=30)


def _until(check: Callable[[], Any], what: str, timeout_s: float = 10) -> Any:
    deadline = time.monotonic() + timeout_s
    while not (found := check()):
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout_s}s"
        time.sleep(0.05)
    return found


def _others(client: httpx.Client) -> list[str]:
    return [r["id"] for r in client.get("/api/gateway/status").json()["other_replicas"]]


def _chat(attempt: Any) -> httpx.Response:
    headers = {"authorization": f"Bearer {attempt.token}"}
    return httpx.post(f"{attempt.base_url}/chat/completions", headers=headers, json=CHAT, timeout=30)


def test_a_pause_on_one_replica_holds_calls_on_another_and_its_resume_brings_the_new_version(
    gateway, attempt, fake, replica_b
):
    assert _chat(attempt).status_code == 200
    before = replica_b.admin.get("/api/policy").json()["current"]  # replica B's database outlives one test
    assert replica_b.admin.post("/api/gateway/pause").json()["paused"] is True
    refused = _until(lambda: (r := _chat(attempt)).status_code == 429 and r, "a 429 from replica A")
    assert "paused" in refused.json()["error"]["message"] and float(refused.headers["retry-after"]) > 0
    with _admin(gateway) as a:
        assert a.get("/api/gateway/status").json()["paused"] is True
    resumed = replica_b.admin.post("/api/gateway/resume", json={"weights_changed": True}).json()
    assert resumed["policy_version"] == before + 1 and resumed["paused"] is False
    _until(lambda: _chat(attempt).status_code == 200, "replica A answering again")
    # Calls A answered before it applied the pause count as the old version; refused ones were never recorded.
    versions = [c.policy_version for c in gateway.server.store.list_model_calls(attempt.rollout_id)]
    assert versions[-1] == before + 1 and set(versions[:-1]) == {before}
    assert len(fake.calls) == len(versions)


async def test_drain_on_one_replica_waits_for_a_call_in_flight_on_another(gateway, attempt, fake, replica_b):
    fake.faults.latency_s = 1.5
    gate = gateway.server.app.state.gateway.gate
    client = openai.AsyncOpenAI(base_url=attempt.base_url, api_key=attempt.token, max_retries=0)
    call = asyncio.create_task(client.chat.completions.create(**CHAT))
    while gate.in_flight == 0:
        assert not call.done(), "the call ended before it was seen in flight"
        await asyncio.sleep(0.01)
    async with httpx.AsyncClient(base_url=replica_b.url, headers=replica_b.admin.headers, timeout=30) as b:
        await b.post("/api/gateway/pause")
        drained = (await b.post("/api/gateway/drain", json={"timeout_s": 20})).json()
        recorded = gateway.server.store.list_model_calls(attempt.rollout_id)
        assert drained["drained"] is True and drained["replicas"] == 2
        assert [c.status_code for c in recorded] == [200]  # B's drain ended only after A's call was done
        reply = await call
        assert reply.choices[0].message.content == fake.calls[-1].response["choices"][0]["message"]["content"]
        await b.post("/api/gateway/resume", json={})
    await client.close()


def test_drain_times_out_while_another_replica_still_has_a_call(gateway, attempt, fake, replica_b):
    fake.faults.latency_s = 3.0
    with httpx.Client(timeout=30) as agent:
        headers = {"authorization": f"Bearer {attempt.token}"}
        pending = agent.build_request("POST", f"{attempt.base_url}/chat/completions", headers=headers, json=CHAT)
        result: dict[str, int] = {}
        worker = threading.Thread(target=lambda: result.update(status=agent.send(pending).status_code))
        worker.start()
        _until(lambda: gateway.server.app.state.gateway.gate.in_flight, "the call reaching replica A")
        replica_b.admin.post("/api/gateway/pause").raise_for_status()
        drained = replica_b.admin.post("/api/gateway/drain", json={"timeout_s": 0.5}).json()
        in_flight = gateway.server.app.state.gateway.gate.in_flight  # as the drain gave up: the call still running
        worker.join(timeout=30)
    assert drained["drained"] is False and drained["waited_s"] >= 0.5 and in_flight == 1
    assert result["status"] == 200  # a pause never cuts a call


def test_a_replica_that_went_silent_is_not_waited_for(gateway):
    store = gateway.server.store
    silent = GatewayReplica(id="gone", address="h:1", paused=False, pause_epoch=0, in_flight=3, reported_at=1.0)
    store.report_gateway_replica(silent)
    with _admin(gateway) as a:
        a.post("/api/gateway/pause").raise_for_status()
        drained = a.post("/api/gateway/drain", json={"timeout_s": 5}).json()
        assert _others(a) == []
    # drained, and before its 5 s: waiting for the silent replica's 3 calls it would have given up undrained
    assert drained == {"drained": True, "in_flight_at_start": 0, "waited_s": drained["waited_s"], "replicas": 1}
    assert drained["waited_s"] < 5


def test_a_new_replica_joins_a_pause_in_force(db_url, store, replica_b):
    replica_b.admin.post("/api/gateway/pause").raise_for_status()
    app = create_app(ServerConfig(admin_key=ADMIN_KEY, db_url=db_url), store=store)
    with ServerThread(app) as url, httpx.Client(base_url=url, headers=replica_b.admin.headers) as c:
        assert c.get("/api/gateway/status").json()["paused"] is True


def test_a_pause_no_running_replica_holds_lapses_when_one_starts(db_url, store):
    store.set_gateway_paused(True)  # left by gateways that are gone: none of them reports any more
    app = create_app(ServerConfig(admin_key=ADMIN_KEY, db_url=db_url), store=store)
    with ServerThread(app) as url, httpx.Client(base_url=url, headers={"Authorization": f"Bearer {ADMIN_KEY}"}) as c:
        assert c.get("/api/gateway/status").json()["paused"] is False
    assert store.gateway_pause().paused is False


# Last: it stops replica B, which the tests before share (a test after it would start a new one).
def test_replicas_see_each_other_and_a_stopped_one_leaves(gateway, replica_b):
    with _admin(gateway) as a:
        b_id = replica_b.admin.get("/api/gateway/status").json()["replica"]
        a_id = a.get("/api/gateway/status").json()["replica"]
        # A replica of an earlier test on this database may still be reporting while its server thread shuts
        # down (a loaded machine); it leaves by its own removal or goes stale within STALE_AFTER_S (5 s).
        _until(lambda: _others(a) == [b_id], "A seeing B, and no other replica")
        _until(lambda: _others(replica_b.admin) == [a_id], "B seeing A, and no other replica")
        replica_b.stop()  # uvicorn shuts down gracefully on SIGTERM, then exits by that signal
        assert _others(a) == []  # B removed its report on the way out
