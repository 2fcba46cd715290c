"""A test agent whose behaviour is its task (ALIGHT_TASK): sleep, spawn a grandchild, dump env, exit code."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time


def _write(path: str, text: str) -> None:
    """Whole or not at all: the tests poll for these files, and a reader between open and write saw it empty."""
    with open(f"{path}.part", "w") as f:
        f.write(text)
    os.replace(f"{path}.part", path)


def main() -> int:
    task = json.loads(os.environ.get("ALIGHT_TASK") or "{}")
    attempt = os.environ.get("ALIGHT_ATTEMPT", "1")
    # Per-attempt overrides: {"by_attempt": {"1": {"sleep": 30}}} makes attempt 1 hang.
    task.update(task.get("by_attempt", {}).get(attempt, {}))
    print(f"agent attempt {attempt} starting", flush=True)
    if task.get("env_out"):
        _write(task["env_out"], json.dumps(dict(os.environ)))
    if task.get("ignore_term"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if task.get("grandchild_pidfile"):
        # A grandchild that ignores SIGTERM: only a SIGKILL to the whole group stops it.
        code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)"
        child = subprocess.Popen([sys.executable, "-c", code])
        _write(task["grandchild_pidfile"], str(child.pid))
    if task.get("pidfile"):
        _write(task["pidfile"], str(os.getpid()))
    began = time.time()
    if task.get("wait_for"):
        # Run until the test creates this file: an end it orders, not a race between a sleep and the test's steps.
        while not os.path.exists(task["wait_for"]):
            time.sleep(0.05)
    time.sleep(float(task.get("sleep", 0)))
    if task.get("interval_dir"):
        # [start, end] of this run, for the concurrency test to compute the overlap.
        name = f"{os.environ.get('ALIGHT_ROLLOUT_ID')}-{attempt}.json"
        _write(os.path.join(task["interval_dir"], name), json.dumps([began, time.time()]))
    print(task.get("say", "agent done"), flush=True)
    return int(task.get("exit", 0))


if __name__ == "__main__":
    sys.exit(main())
