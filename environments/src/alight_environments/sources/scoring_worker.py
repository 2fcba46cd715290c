"""reasoning-gym's scoring worker: one request per line on stdin, one reply per line on stdout.

Each answer is scored in a forked child with CPU and memory limits, which writes its score to a pipe of its
own and exits; a child past its time is killed and the answer scores 0.
"""

from __future__ import annotations

import json
import os
import resource
import select
import signal
import sys
from typing import Any

from alight_environments.sources.reasoning_gym import entry

CHILD_CPU_S = 10
CHILD_WALL_S = 20.0
CHILD_MEMORY = 2 * 1024**3


def score_in_child(request: dict[str, Any]) -> dict[str, Any]:
    ref = request["ref"]
    dataset, item = entry(str(ref["task"]), int(ref["seed"]), dict(ref.get("config") or {}))
    if item["question"] != request["question"]:
        return {"error": "the task's question is not the one its reference makes (reasoning-gym changed?)"}
    readable, writable = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: the answer may run code here; it reaches nothing but its own pipe
        os.close(readable)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1):
            os.dup2(null, fd)
        resource.setrlimit(resource.RLIMIT_CPU, (CHILD_CPU_S, CHILD_CPU_S))
        resource.setrlimit(resource.RLIMIT_AS, (CHILD_MEMORY, CHILD_MEMORY))
        try:
            reply = {"score": float(dataset.score_answer(request["answer"], item))}
        except Exception as exc:  # a scorer that chokes on an answer: the answer's fault
            reply = {"score": 0.0, "note": f"{type(exc).__name__}: {exc}"[:300]}
        os.write(writable, json.dumps(reply).encode())
        os._exit(0)
    os.close(writable)
    ready, _, _ = select.select([readable], [], [], CHILD_WALL_S)
    output = os.read(readable, 65536) if ready else b""
    os.close(readable)
    if not ready:
        os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    try:
        return json.loads(output) if output else {"score": 0.0, "note": "the scorer ran out of time or memory"}
    except ValueError:
        return {"score": 0.0, "note": "the scorer's child wrote no score"}


def main() -> None:
    for line in sys.stdin:
        try:
            reply = score_in_child(json.loads(line))
        except Exception as exc:
            reply = {"error": f"{type(exc).__name__}: {exc}"[:500]}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
