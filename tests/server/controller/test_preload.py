"""Preloaded starts (controller.preload): attempts fork from one process that imported the entrypoint once."""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from controller_testkit import create_rollout, make_start, pid_alive, wait_terminal, wait_until

from alight.client import AlightClient
from alight.schemas import AttemptStart, RunnerSpec
from alight_server.controller.base import RunPhase
from alight_server.controller.local import LocalRunner
from alight_server.controller.loop import Controller

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="preloaded starts fork")
AGENTS = Path(__file__).parent / "agents"
ENTRY = f"{AGENTS / 'preloaded.py'}:main"


@pytest.fixture
def import_log(tmp_path: Path) -> Path:
    return tmp_path / "imports.log"


def _spec(import_log: Path, **env: str) -> RunnerSpec:
    return RunnerSpec(entrypoint=ENTRY, cwd=str(AGENTS), env={"IMPORT_LOG": str(import_log), **env})


class _Accept(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def sink() -> Iterator[str]:
    """A server URL that takes whatever an attempt sends (its spans, at exit): with make_start's closed port 9 the
    SDK's exporter retried each exit for about 7 s before giving up."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Accept)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


def start_of(sink: str, rollout_id: str = "r1", **fields: Any) -> AttemptStart:
    """make_start's attempt, its traces sent to `sink`."""
    return make_start(rollout_id, **fields).model_copy(update={"otlp_traces_endpoint": f"{sink}/v1/traces"})


def _finished(runner: LocalRunner, handle: str):
    return wait_until(lambda: (s := runner.poll(handle)).ended and s, timeout_s=60)


def test_attempts_import_the_entrypoint_once_and_each_gets_its_own_attempt(
    logs_dir: Path, tmp_path: Path, import_log: Path, sink: str
) -> None:
    runner = LocalRunner(logs_dir, preload=True)
    try:
        handles, outs = [], []
        for i in range(3):
            outs.append(tmp_path / f"out{i}.json")
            start = start_of(sink, f"r{i}", task={"out": str(outs[i]), "exit": 0}, runner=_spec(import_log))
            handles.append(runner.start(start))
        for handle in handles:
            status = _finished(runner, handle)
            assert (status.phase, status.exit_code) == (RunPhase.EXITED, 0)
    finally:
        runner.close()
    assert len(import_log.read_text().splitlines()) == 1
    seen = [json.loads(out.read_text()) for out in outs]
    assert [s["env"]["ALIGHT_ROLLOUT_ID"] for s in seen] == ["r0", "r1", "r2"]
    assert [s["env"]["OPENAI_BASE_URL"] for s in seen] == [f"{sink}/gw/r{i}/1/v1" for i in range(3)]
    assert [s["seen"] for s in seen] == [["r0"], ["r1"], ["r2"]]  # module state is each fork's own
    assert len({s["pid"] for s in seen}) == 3
    assert all(s["argv"][1] == ENTRY and s["cwd"] == str(AGENTS) for s in seen)
    assert "attempt of r1 starting" in (logs_dir / "r1" / "1.log").read_text()


@pytest.mark.parametrize("preload", [False, True])
def test_an_attempts_imports_are_frozen_before_it_runs(
    logs_dir: Path, tmp_path: Path, import_log: Path, preload: bool, sink: str
) -> None:
    """gc.freeze after the import: the attempt's exit skips collecting them (~0.4 CPU-s for openai + OTel)."""
    out = tmp_path / "out.json"
    runner = LocalRunner(logs_dir, preload=preload)
    try:
        status = _finished(runner, runner.start(start_of(sink, task={"out": str(out)}, runner=_spec(import_log))))
    finally:
        runner.close()
    assert (status.phase, status.exit_code) == (RunPhase.EXITED, 0)
    assert json.loads(out.read_text())["frozen"] > 1000  # the SDK's and the agent's imports, not a handful


def test_a_preloaded_attempts_exit_code_is_recorded(logs_dir: Path, import_log: Path, sink: str) -> None:
    runner = LocalRunner(logs_dir, preload=True)
    try:
        handle = runner.start(start_of(sink, task={"exit": 3}, runner=_spec(import_log)))
        status = _finished(runner, handle)
    finally:
        runner.close()
    assert (status.phase, status.exit_code) == (RunPhase.EXITED, 3)


def test_kill_stops_a_preloaded_attempt(logs_dir: Path, tmp_path: Path, import_log: Path, sink: str) -> None:
    out = tmp_path / "out.json"
    runner = LocalRunner(logs_dir, preload=True)
    try:
        handle = runner.start(start_of(sink, task={"out": str(out), "sleep": 60}, runner=_spec(import_log)))
        pid = json.loads(wait_until(lambda: out.exists() and out.read_text()))["pid"]
        runner.kill(handle, grace_s=5)
        status = _finished(runner, handle)
    finally:
        runner.close()
    assert (status.phase, status.exit_code) == (RunPhase.EXITED, -signal.SIGTERM)
    assert not pid_alive(pid)


def test_an_entrypoint_that_starts_threads_when_imported_starts_the_usual_way(
    logs_dir: Path, import_log: Path, caplog: pytest.LogCaptureFixture, sink: str
) -> None:
    runner = LocalRunner(logs_dir, preload=True)
    try:
        with caplog.at_level(logging.WARNING):
            handles = [
                runner.start(start_of(sink, f"t{i}", task={"exit": 0}, runner=_spec(import_log, START_A_THREAD="1")))
                for i in range(2)
            ]
        assert all(_finished(runner, h).exit_code == 0 for h in handles)
    finally:
        runner.close()
    assert len(import_log.read_text().splitlines()) == 3  # the zygote's refused import, then one per attempt
    assert "cannot preload" in caplog.text
    assert "started threads" in next(logs_dir.glob("zygote-*.log")).read_text()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_preloaded_attempts_die_with_a_stack_runner_killed_by_sigkill(
    logs_dir: Path, tmp_path: Path, import_log: Path
) -> None:
    out = tmp_path / "out.json"
    spec = _spec(import_log)
    code = (
        "import sys, time; sys.path.insert(0, sys.argv[1])\n"
        "from controller_testkit import make_start\n"
        "from alight.schemas import RunnerSpec\n"
        "from alight_server.controller.local import LocalRunner\n"
        "runner = LocalRunner(sys.argv[2], die_with_parent=True, preload=True)\n"
        f"runner.start(make_start(task={{'out': {str(out)!r}, 'sleep': 120}}, runner=RunnerSpec(**{spec.model_dump()!r})))\n"
        "time.sleep(120)\n"
    )
    # The owner's temporary folders, where the zygote's socket is made: short, as a socket path must fit in 108
    # bytes (under tmp_path it would not, and the attempt would start the usual way).
    scratch = Path(tempfile.mkdtemp(prefix="alight-test-"))
    env = {**os.environ, "TMPDIR": str(scratch)}
    try:
        owner = subprocess.Popen([sys.executable, "-c", code, str(Path(__file__).parent), str(logs_dir)], env=env)
        pid = json.loads(wait_until(lambda: out.exists() and out.read_text(), timeout_s=60))["pid"]
        assert list(scratch.glob("*/*.sock")), "the attempt was not preloaded"
        owner.kill()
        owner.wait()
        wait_until(lambda: not pid_alive(pid), timeout_s=15)
        wait_until(lambda: not list(scratch.iterdir()), timeout_s=15)  # the orphaned zygote cleaned up after it
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    runner = LocalRunner(logs_dir)
    (handle,) = runner.handles()
    assert _finished(runner, handle).phase is RunPhase.LOST  # no exit status: an infra failure, retried


def test_a_preloaded_entrypoint_agent_reports_its_reward(
    live_server, logs_dir: Path, admin_client: httpx.Client, import_log: Path
) -> None:
    client = AlightClient(live_server.url, admin_key=live_server.admin_key)
    controller = Controller(client, LocalRunner(logs_dir, preload=True), concurrency=2, poll_interval=0.05)
    runner = {"entrypoint": ENTRY, "cwd": str(AGENTS), "env": {"IMPORT_LOG": str(import_log)}}
    for i in range(2):
        create_rollout(admin_client, f"pre-{i}", task={"reward": 0.5 + i}, runner=runner)
    controller.start()
    try:
        for i in range(2):
            assert wait_terminal(admin_client, f"pre-{i}", timeout_s=60)["state"] == "succeeded"
            rewards = admin_client.get(f"/api/rollouts/pre-{i}/rewards").json()
            rewards = rewards["rewards"] if isinstance(rewards, dict) else rewards
            assert [r["value"] for r in rewards] == [0.5 + i]
    finally:
        controller.stop(kill_running=True)
        controller.runner.close()
    assert len(import_log.read_text().splitlines()) == 1
