"""Attempt supervisor: runs the agent and records its exit status where a restarted controller can read it.

The local runner starts `python -I supervise.py EXIT_FILE -- AGENT_ARGV...` as the leader of the attempt's process
group. Only a process's parent can learn its exit status, and the parent (the controller) may restart while the
agent runs; so this small script (the standard library, and the SDK's parent_death.py under --die-with) waits for
the agent and writes `{"exit_code": N}` (or `{"spawn_error": "..."}`) to EXIT_FILE. It is run by path with `-I`,
never imported, so it costs one bare interpreter start.

`--die-with PID` (the embedded stack): on Linux, when process PID dies (kill -9 included) the kernel signals this
supervisor (PR_SET_PDEATHSIG), which kills the attempt's whole process group, itself included, without an exit
status: the next controller reads that as a lost attempt, an infra failure to retry.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
from types import ModuleType


def _write(path: str, outcome: dict[str, object]) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(outcome, f)
    os.replace(tmp, path)  # a reader sees the whole file or none of it


def _keep_going(signum: int, frame: object) -> None:
    # The runner signals the whole group; the agent decides how to stop, we stay to record it.
    # A Python-level handler (unlike SIG_IGN) is reset to the default in the exec'd agent.
    pass


def _reap_group(signum: int = 0, frame: object = None) -> None:
    os.killpg(os.getpgrp(), signal.SIGKILL)


def _parent_death() -> ModuleType:
    """The SDK's alight/parent_death.py, loaded alone: importing the `alight` package would cost this start."""
    package = importlib.util.find_spec("alight")  # finds the package without running its __init__
    folders = package.submodule_search_locations if package else None
    if not folders:
        raise ImportError("the alight SDK is not installed in this interpreter")
    spec = importlib.util.spec_from_file_location("alight.parent_death", os.path.join(folders[0], "parent_death.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv: list[str]) -> int:
    if len(argv) >= 6 and argv[2] == "--die-with":
        _parent_death().on_parent_death(_reap_group, int(argv[3]))
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
