"""Crash drill helpers: processes in their own groups, the killed run's agents, the invariants checked after."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from alight.api_models import RolloutQuery
from alight.schemas import AttemptStatus, FailureKind, RolloutState
from alight_server.store.keys.kek import KekSource
from alight_server.store.sql import SqlStore
from alight_testing.services import stop as stop  # the drills stop processes like every other test

BIN = Path(sys.executable).parent
AGENTS = Path(__file__).parent / "agents"


def start(argv: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env={**os.environ, **(env or {})}
        )


def kill_9(proc: subprocess.Popen[bytes]) -> None:
    """kill -9 of the process alone (not its group): what an OOM killer or a crash does."""
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


def wait_for(check: Callable[[], Any], what: str, timeout_s: float = 120.0, proc: Any = None, log: Any = None) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"process ended (rc {proc.returncode}) before {what}:\n{_tail(log)}")
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s}s: {what}\n{_tail(log)}")
        time.sleep(0.05)


def _tail(log: Path | None) -> str:
    return log.read_text()[-4000:] if log is not None and log.exists() else ""


def agent_pids(logs_dir: Path) -> set[int]:
    """Supervisor pids (process-group leaders) of every attempt the local runner still holds."""
    pids = set()
    for path in logs_dir.glob("*/*.state.json"):
        try:
            pids.add(int(json.loads(path.read_text())["pid"]))
        except (OSError, ValueError, KeyError):
            continue
    return pids


def group_alive(pgid: int) -> bool:
    """Is any process (not a zombie) left in process group `pgid`?"""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2 :].split()
        if int(fields[2]) == pgid and fields[0] not in "ZX":
            return True
    return False


def assert_settled(db_url: str, answered_dir: Path, data_key: KekSource) -> dict[str, int]:
    """The invariants after recovery; returns counts for the report.

    Nothing answered is lost, no rollout is left queued or running, and every attempt lost as
    infra was followed by a new attempt of its rollout.
    """
    store = SqlStore(db_url, data_key)  # the server's KEK: its content is sealed under data keys it wraps
    try:
        rollouts = store.list_rollouts(RolloutQuery(limit=1000))
        stuck = [r.id for r in rollouts if r.state in (RolloutState.QUEUED, RolloutState.RUNNING)]
        assert not stuck, f"rollouts left unfinished: {stuck}"
        stored = {
            str(c.response.get("id")) for r in rollouts for c in store.list_model_calls(r.id) if c.response is not None
        }
        answered = {p.name.rsplit(".", 1)[0] for p in answered_dir.iterdir()}
        assert answered <= stored, f"answered but not stored: {sorted(answered - stored)[:5]}"
        infra = 0
        for rollout in rollouts:
            for attempt in rollout.attempts:
                if attempt.failure_kind is FailureKind.INFRA and attempt.status is AttemptStatus.FAILED:
                    infra += 1
                    later = [a for a in rollout.attempts if a.attempt > attempt.attempt]
                    assert later, f"infra loss of {rollout.id} attempt {attempt.attempt} was not retried"
        succeeded = sum(r.state is RolloutState.SUCCEEDED for r in rollouts)
        return {"rollouts": len(rollouts), "succeeded": succeeded, "answered": len(answered), "infra_retried": infra}
    finally:
        store.close()
