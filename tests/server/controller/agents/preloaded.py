"""A test entrypoint for preloaded starts: its import is logged, its task says what each attempt does."""

from __future__ import annotations

import gc
import json
import os
import sys
import threading
import time

if os.environ.get("IMPORT_LOG"):  # one line per import of this module: once per zygote, or per plain start
    with open(os.environ["IMPORT_LOG"], "a") as f:
        f.write(f"{os.getpid()}\n")
if os.environ.get("START_A_THREAD"):  # an import that starts a thread cannot be forked from
    # Alive until the process exits, however long the zygote's remaining imports take on a loaded machine.
    threading.Thread(target=threading.Event().wait, daemon=True).start()

_seen = []  # module state a fork must not share between attempts


def main(task: dict) -> float:
    _seen.append(os.environ.get("ALIGHT_ROLLOUT_ID"))
    print(f"attempt of {os.environ.get('ALIGHT_ROLLOUT_ID')} starting", flush=True)
    if task.get("out"):
        with open(task["out"], "w") as f:
            json.dump({"env": dict(os.environ), "pid": os.getpid(), "argv": sys.argv, "seen": _seen,
                       "cwd": os.getcwd(), "frozen": gc.get_freeze_count()}, f)  # fmt: skip
    time.sleep(float(task.get("sleep", 0)))
    if "exit" in task:
        sys.exit(task["exit"])
    return float(task.get("reward", 1.0))
