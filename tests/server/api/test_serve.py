"""`alight serve` as users run it: a real subprocess, settings resolution, and durability across kill -9."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from alight.cli import app as cli
from alight_server.commands.serve import build_config
from alight_server.stacks.server_thread import free_port

ALIGHT = str(Path(sys.executable).parent / "alight")


@contextmanager
def serve(args: list[str], env: dict[str, str] | None = None) -> Iterator[tuple[subprocess.Popen[str], str]]:
    port = free_port()
    proc = subprocess.Popen(
        [ALIGHT, "serve", "--port", str(port), "--log-level", "warning", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **(env or {})},
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                break
        except httpx.TransportError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"alight serve did not come up: {proc.communicate()[0]}")
        time.sleep(0.1)
    try:
        yield proc, url
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
        if proc.stdout:
            proc.stdout.close()


def test_acknowledged_writes_survive_kill_9(tmp_path: Path) -> None:
    db = tmp_path / "state" / "alight.db"
    key = {"Authorization": "Bearer crash-key"}
    acked: list[str] = []
    with (
        serve(["--db", str(db), "--admin-key", "crash-key"]) as (proc, url),
        httpx.Client(base_url=url, headers=key, timeout=10) as client,
    ):
        body = {"rollouts": [{"id": f"r{i}", "task": {"i": i}} for i in range(20)]}
        assert client.post("/api/rollouts", json=body).status_code == 200
        assert len(client.post("/api/attempts/claim", json={"limit": 5}).json()["attempts"]) == 5
        client.post("/api/rollouts/r0/attempts/1/finish", json={"status": "succeeded"}).raise_for_status()
        stop = threading.Event()

        def write_events() -> None:
            n = 0
            while not stop.is_set():
                try:
                    response = client.post("/api/rollouts/r1/events", json={"id": f"e{n}", "kind": "log"})
                except httpx.TransportError:
                    return  # the server died under us: this one was never acknowledged
                if response.status_code == 200:
                    acked.append(f"e{n}")
                n += 1

        writer = threading.Thread(target=write_events)
        writer.start()
        while len(acked) < 30:
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        stop.set()
        writer.join(timeout=30)

    with (
        serve(["--db", str(db), "--admin-key", "crash-key"]) as (_, url),
        httpx.Client(base_url=url, headers=key, timeout=10) as client,
    ):
        rollouts = client.get("/api/rollouts", params={"limit": 1000}).json()["rollouts"]
        assert len(rollouts) == 20
        states = {r["id"]: r["state"] for r in rollouts}
        assert states["r0"] == "succeeded" and sum(s == "running" for s in states.values()) == 4
        stored = {e["id"] for e in client.get("/api/rollouts/r1/events").json()["events"]}
        assert set(acked) <= stored, f"lost acknowledged events: {sorted(set(acked) - stored)[:5]}"


def test_on_loopback_without_a_key_it_generates_one_and_prints_it_once(tmp_path: Path) -> None:
    env = {"ALIGHT_ADMIN_KEY": "", "ALIGHT_DB": str(tmp_path / "a.db")}
    with serve([], env=env) as (proc, url):
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("admin key (generated, shown once): ")
        key = line.split(": ", 1)[1].strip()
        ok = httpx.get(f"{url}/api/rollouts", headers={"Authorization": f"Bearer {key}"})
        assert ok.status_code == 200


def test_off_loopback_without_a_key_it_refuses_to_start() -> None:
    result = CliRunner().invoke(cli, ["serve", "--host", "0.0.0.0"], env={"ALIGHT_ADMIN_KEY": ""})
    assert result.exit_code == 2
    assert "refusing to serve on 0.0.0.0 without an admin key" in result.output


def test_settings_come_from_yaml_then_flags(tmp_path: Path) -> None:
    config = tmp_path / "server.yaml"
    config.write_text("port: 9001\nhost: 0.0.0.0\ndb_url: data/x.db\ngateway:\n  train_temperature: 0.7\n")
    cfg = build_config(config, {"port": 9002, "host": None})
    assert (cfg.port, cfg.host, cfg.gateway.train_temperature) == (9002, "0.0.0.0", 0.7)
    assert cfg.db_url == f"sqlite:///{Path('data/x.db').resolve()}"
    assert build_config(None, {"db_url": "postgresql+psycopg://u@h/db"}).db_url == "postgresql+psycopg://u@h/db"


def test_help_works() -> None:
    assert "--admin-key" in CliRunner().invoke(cli, ["serve", "--help"]).output
    assert "serve" in CliRunner().invoke(cli, ["--help"]).output


def test_a_store_that_cannot_be_opened_is_named_without_its_password() -> None:
    db = "postgresql+psycopg://alice:s3cret-pw@127.0.0.1:1/alight"  # nothing listens on port 1
    result = CliRunner().invoke(cli, ["serve", "--db", db, "--admin-key", "k"], env={"ALIGHT_ADMIN_KEY": ""})
    assert result.exit_code != 0
    assert "cannot open the store at postgresql+psycopg://alice:***@127.0.0.1:1/alight" in result.output
    assert "s3cret-pw" not in result.output
