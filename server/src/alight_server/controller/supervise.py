"""Attempt supervisor: runs the agent and records its exit status where a restarted controller can read it.

The local runner starts `python -I supervise.py EXIT_FILE -- AGENT_ARGV...` as
the leader of the attempt's process group. Only a process's parent can learn
its exit status, and the parent (the controller) may restart while the agent
runs; so this small stdlib-only script waits for the agent and writes
`{"exit_code": N}` (or `{"spawn_error": "..."}`) to EXIT_FILE. It is run by
path with `-I`, never imported, so it costs one bare interpreter start.

`--die-with PID` (the embedded stack): on Linux, when process PID dies (kill -9
included) the kernel signals this supervisor (PR_SET_PDEATHSIG), which kills
the attempt's whole process group, itself included, without an exit status:
the next controller reads that as a lost attempt, an infra failure to retry.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys


def _write(path: str, outcome: dict[str, object]) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(outcome, f)
    os.replace(tmp, path)  # a reader sees the whole file or none of it


def _keep_going(signum: int, frame: object) -> None:
    # The runner signals the whole group; the agent decides how to stop, we stay to record it.
    # A Python-level handler (unlike SIG_IGN) is reset to the default in the exec'd agent.
    pass


PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
PARENT_DIED = signal.SIGUSR2  # a signal nothing else sends the supervisor


def _reap_group(signum: int = 0, frame: object = None) -> None:
    os.killpg(os.getpgrp(), signal.SIGKILL)


def _die_with(parent: int) -> None:
    if not sys.platform.startswith("linux"):
        return  # elsewhere the stack's next start reaps the group (LocalRunner.reap_leftovers)
    import ctypes

    signal.signal(PARENT_DIED, _reap_group)
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(PARENT_DIED))
    if os.getppid() != parent:  # it died before the prctl took effect
        _reap_group()


def main(argv: list[str]) -> int:
    if len(argv) >= 6 and argv[2] == "--die-with":
        _die_with(int(argv[3]))
        argv = [*argv[:2], *argv[4:]]
    if len(argv) < 4 or argv[2] != "--":
        print("usage: supervise.py EXIT_FILE [--die-with PID] -- ARGV...", file=sys.stderr)
        return 2
    exit_file, command = argv[1], argv[3:]
    signal.signal(signal.SIGTERM, _keep_going)
    signal.signal(signal.SIGINT, _keep_going)
    try:
        agent = subprocess.Popen(command)
    except OSError as exc:
        message = f"could not start agent command {command[0]!r} in {os.getcwd()!r}: {exc.strerror or exc}"
        print(f"alight: {message}", file=sys.stderr, flush=True)
        _write(exit_file, {"spawn_error": message})
        return 127
    _write(exit_file, {"exit_code": agent.wait()})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
