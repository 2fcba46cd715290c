"""Preloaded starts: one process imports an agent's entrypoint once, then forks every attempt from it.

Why, and what it changes for an agent: docs/controller.md, "Preloaded starts". The local runner starts

    python zygote.py SOCKET TARGET [--die-with PID]

by path, in the agent's interpreter, cwd and environment (without the attempt's variables). It imports
TARGET, refuses to go on if that import started threads (a fork keeps only the forking thread), and
serves one request per connection on the Unix socket SOCKET: a JSON line {"env", "log", "exit_file"}
answered by {"pid": N}. N leads the attempt exactly as supervise.py does, and with --die-with the whole
group is killed when the zygote dies (the zygote itself dies with PID).

Stdlib and the alight SDK only: it runs in the agent's environment, which may not have alight_server.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import sys
import threading
import traceback

from alight.parent_death import PARENT_DIED, on_parent_death


def _write(path: str, outcome: dict[str, object]) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(outcome, f)
    os.replace(tmp, path)


def _keep_going(signum: int, frame: object) -> None:
    pass  # the leader stays to record the agent's exit; the agent decides how to stop


class Zygote:
    def __init__(self, listener: socket.socket, sock: str, die_with: int | None) -> None:
        self.listener = listener
        self.sock = sock
        self.die_with = die_with
        self.leaders: set[int] = set()

    def serve(self) -> None:
        """Fork attempts until stopped; returns only in a forked agent process."""
        while True:
            ready, _, _ = select.select([self.listener], [], [], 0.2)
            self._reap()
            if not ready:
                continue
            conn, _ = self.listener.accept()
            with conn:
                try:
                    request = json.loads(conn.makefile("r").readline())
                    env, log, exit_file = dict(request["env"]), str(request["log"]), str(request["exit_file"])
                except (ValueError, KeyError, TypeError) as exc:
                    conn.sendall(json.dumps({"error": f"bad request: {exc}"}).encode() + b"\n")
                    continue
                sys.stdout.flush()
                sys.stderr.flush()
                pid = os.fork()
                if pid == 0:
                    conn.close()
                    self.listener.close()
                    self._lead(env, log, exit_file)
                    return
                self.leaders.add(pid)
                conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")

    def _reap(self) -> None:
        while self.leaders:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                self.leaders.clear()
                return
            if pid == 0:
                return
            self.leaders.discard(pid)

    def kill_attempts(self, signum: int = 0, frame: object = None) -> None:
        for pid in list(self.leaders):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        os._exit(0)

    def orphaned(self, signum: int = 0, frame: object = None) -> None:
        """The runner died, kill -9 included: nobody else removes the socket, nor (the last one gone) its folder."""
        with contextlib.suppress(OSError):
            os.unlink(self.sock)
            os.rmdir(os.path.dirname(self.sock))
        if self.die_with is not None:
            self.kill_attempts()
        os._exit(0)

    def _lead(self, env: dict[str, str], log: str, exit_file: str) -> None:
        """In the attempt's leader: fork the agent, record its exit status, never return (the agent does)."""
        zygote = os.getppid()
        os.setsid()
        signal.signal(PARENT_DIED, signal.SIG_DFL)
        if self.die_with is not None:
            on_parent_death(lambda *_: os.killpg(os.getpgrp(), signal.SIGKILL), zygote)
        log_fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        null_fd = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null_fd, 0)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        os.close(log_fd)
        os.close(null_fd)
        signal.signal(signal.SIGTERM, _keep_going)
        signal.signal(signal.SIGINT, _keep_going)
        try:
            agent = os.fork()
        except OSError as exc:
            message = f"could not fork the preloaded agent: {exc.strerror or exc}"
            print(f"alight: {message}", file=sys.stderr, flush=True)
            _write(exit_file, {"spawn_error": message})
            os._exit(127)
        if agent == 0:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            signal.signal(PARENT_DIED, signal.SIG_DFL)
            os.environ.clear()
            os.environ.update(env)
            return
        _, status = os.waitpid(agent, 0)
        _write(exit_file, {"exit_code": os.waitstatus_to_exitcode(status)})
        os._exit(0)


def main(argv: list[str]) -> int:
    if len(argv) not in (3, 5) or (len(argv) == 5 and argv[3] != "--die-with"):
        print("usage: zygote.py SOCKET TARGET [--die-with PID]", file=sys.stderr)
        return 2
    sock_path, target = argv[1], argv[2]
    die_with = int(argv[4]) if len(argv) == 5 else None
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]  # not this folder's modules
    sys.path.insert(0, os.getcwd())  # as under `python -m alight.entry`
    from alight import entry

    try:
        fn = entry.load_target(target)
        from alight import telemetry

        telemetry.preload()  # what every rollout imports at its start, imported once here
    except Exception:
        traceback.print_exc()
        return 1
    if threading.active_count() > 1:
        names = ", ".join(t.name for t in threading.enumerate() if t is not threading.main_thread())
        print(
            f"alight: importing {target} started threads ({names}); a preloaded start cannot fork them. "
            "Start them inside the entrypoint, or set controller.preload: false",
            file=sys.stderr,
        )
        return 3
    # What the import built lives as long as every attempt: out of the collector's sight, a fork's pages
    # stay shared and its exit does not walk the whole inherited heap (entry.freeze_imports says more).
    entry.freeze_imports()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(f"{sock_path}.tmp")
    listener.listen(64)
    os.rename(f"{sock_path}.tmp", sock_path)  # the runner waits for the name: it appears ready to connect
    zygote = Zygote(listener, sock_path, die_with)
    signal.signal(signal.SIGTERM, zygote.kill_attempts if die_with is not None else signal.SIG_DFL)
    parent = die_with if die_with is not None else os.getppid()
    # The zygote never outlives the runner; its attempts do only when they may (no --die-with).
    on_parent_death(zygote.orphaned, parent)
    zygote.serve()
    sys.argv = [str(entry.__file__), target]  # what the agent sees under `python -m alight.entry`
    return entry.run_loaded(fn)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
