"""A test agent whose behaviour is its task (ALIGHT_TASK): sleep, spawn a grandchild, dump env, exit code."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time


def main() -> int:
    task = json.loads(os.environ.get("ALIGHT_TASK") or "{}")
    attempt = os.environ.get("ALIGHT_ATTEMPT", "1")
    # Per-attempt overrides: {"by_attempt": {"1": {"sleep": 30}}} makes attempt 1 hang.
    task.update(task.get("by_attempt", {}).get(attempt, {}))
    print(f"agent attempt {attempt} starting", flush=True)
    if task.get("env_out"):
        with open(task["env_out"], "w") as f:
            json.dump(dict(os.environ), f)
    if task.get("ignore_term"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if task.get("grandchild_pidfile"):
        # A grandchild that ignores SIGTERM: only a SIGKILL to the whole group stops it.
        code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)"
        child = subprocess.Popen([sys.executable, "-c", code])
        with open(task["grandchild_pidfile"], "w") as f:
            f.write(str(child.pid))
    if task.get("pidfile"):
        with open(task["pidfile"], "w") as f:
            f.write(str(os.getpid()))
    began = time.time()
    time.sleep(float(task.get("sleep", 0)))
    if task.get("interval_dir"):
        # [start, end] of this run, for the concurrency test to compute the overlap.
        name = f"{os.environ.get('ALIGHT_ROLLOUT_ID')}-{attempt}.json"
        with open(os.path.join(task["interval_dir"], name), "w") as f:
            json.dump([began, time.time()], f)
    print(task.get("say", "agent done"), flush=True)
    return int(task.get("exit", 0))


if __name__ == "__main__":
    sys.exit(main())
