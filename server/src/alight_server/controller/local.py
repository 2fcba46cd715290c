"""Local runner: each attempt is a subprocess in its own process group, with its state on disk.

Per attempt, under `logs_dir/<rollout id>/`:
  `<n>.log`         the agent's stdout and stderr while it runs (the agent writes it itself)
  `<n>.log.sealed`  that output once the attempt is released, sealed by `log_seal` (the clear file removed;
                    without a `log_seal` the clear file is kept)
  `<n>.state.json`  pid, process start time, wall-clock start: what adoption needs
  `<n>.exit.json`   written by the supervisor when the agent ends: its exit status

Adoption after a restart (`handles()`, and a pid checked to be the process it started) and preloaded starts
(`preload=True`: preload.py, zygote.py): docs/controller.md, "Restarts" and "Preloaded starts".

Long because: the Runner's verbs for one kind of attempt, a process group on this machine, and the /proc
checks at the end that tell its process from a recycled pid; the supervisor (supervise.py) and the zygote
(preload.py, zygote.py) already live apart.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from alight import envvars
from alight.attempt_logs import DEFAULT_LOGS_DIR, attempt_dir, attempt_log_path, sealed_log
from alight.schemas import AttemptStart, attempt_handle, parse_handle
from alight_server.controller.base import RunPhase, RunStatus, SpawnError
from alight_server.controller.preload import Preloader

SUPERVISOR = str(Path(__file__).with_name("supervise.py"))
log = logging.getLogger("alight.controller")


class LogSealer(Protocol):
    """Seals an ended attempt's log file at rest (alight_server/store/keys/sealed_logs.py is the one in use)."""

    def seal(self, path: Path) -> Path:
        """Write the sealed copy of `path` beside it, remove `path`, return the sealed file."""
        ...

    def read(self, sealed: Path) -> bytes: ...


class LocalRunner:
    """Runs attempts as local subprocesses; see the module docstring for the files it keeps."""

    def __init__(
        self,
        logs_dir: str | Path = DEFAULT_LOGS_DIR,
        *,
        name: str | None = None,
        agent_server_url: str | None = None,
        python: str = sys.executable,
        base_env: Mapping[str, str] | None = None,
        die_with_parent: bool = False,
        preload: bool = False,
        log_seal: LogSealer | None = None,
    ) -> None:
        self.logs_dir = Path(logs_dir).absolute()  # absolute: agents run in their own cwd
        # The host is part of the name so that two machines' local controllers never fail each other's attempts.
        self.name = name or f"local@{socket.gethostname()}"
        # Where agents reach the server; by default the address the server handed out in the claim.
        self.agent_server_url = agent_server_url
        self.python = python
        self.base_env = dict(os.environ if base_env is None else base_env)
        # True (the embedded stack): an attempt's process group is killed when this process dies.
        # False (`alight controller`): agents outlive a controller restart and are adopted.
        self.die_with_parent = die_with_parent
        self._children: dict[str, subprocess.Popen[bytes]] = {}  # attempts this instance spawned
        self._preloaded: set[str] = set()  # attempts this instance forked from a zygote (not its children)
        # preload: entrypoint attempts fork from a process that imported the agent once (preload.py).
        self._preloader = (
            Preloader(python, self.logs_dir, os.getpid() if die_with_parent else None) if preload else None
        )
        self._force_kill_at: dict[str, float] = {}  # handle -> monotonic time of the SIGKILL
        self._swept: set[str] = set()  # groups already cleaned after their leader ended
        self.log_seal = log_seal  # seals each released attempt's log (None: the clear file is kept)

    def handle_for(self, rollout_id: str, attempt: int) -> str:
        return attempt_handle(self.name, rollout_id, attempt)

    def _paths(self, handle: str) -> tuple[Path, Path, Path]:
        _, rollout_id, attempt = parse_handle(handle)
        folder = attempt_dir(self.logs_dir, rollout_id)
        log = attempt_log_path(self.logs_dir, rollout_id, attempt)  # where `alight logs` reads it
        return log, folder / f"{attempt}.state.json", folder / f"{attempt}.exit.json"

    def _state(self, handle: str) -> dict[str, object] | None:
        try:
            return json.loads(self._paths(handle)[1].read_text())
        except (OSError, ValueError):
            return None

    def start(self, start: AttemptStart) -> str:
        rollout = start.rollout
        handle = self.handle_for(rollout.id, start.attempt)
        if self._state(handle) is not None:
            return handle  # started before (maybe by an earlier controller): never start twice
        spec = rollout.runner
        if spec is None:
            raise SpawnError(
                f"rollout {rollout.id!r} has no runner spec, so there is nothing to start; create it with "
                "runner={'entrypoint': 'agent.py:main'} or runner={'command': [...]}"
            )
        try:
            argv = envvars.agent_argv(spec, self.python)
        except ValueError as exc:
            raise SpawnError(f"rollout {rollout.id!r}: {exc}") from exc
        cwd = spec.cwd
        if cwd is not None and not Path(cwd).is_dir():
            raise SpawnError(f"rollout {rollout.id!r}: runner cwd {cwd!r} is not a directory on {self.name}")
        log_path, state_path, exit_path = self._paths(handle)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        exit_path.unlink(missing_ok=True)
        server_url = self.agent_server_url or start.otlp_traces_endpoint.removesuffix("/v1/traces")
        # Only the host variables the spec names (and a few harmless defaults): never the controller's
        # ALIGHT_* settings, and no credential the user did not hand this agent on purpose.
        env = envvars.inherited_env(self.base_env, spec.inherit_env)
        env.setdefault("PYTHONUNBUFFERED", "1")  # so a killed agent's last lines still reach the log
        env.update(spec.env)
        contract = envvars.attempt_env(start, server_url, task_dir=log_path.parent)  # the contract wins
        if self._preloader is not None and spec.entrypoint:
            pid = self._preloader.spawn(spec, env, contract, log_path, exit_path)
            if pid is not None:
                self._preloaded.add(handle)
                self._write_state(handle, state_path, pid, argv, cwd, [*env, *contract])
                return handle
        env.update(contract)
        with log_path.open("ab") as log:
            try:
                watch = ["--die-with", str(os.getpid())] if self.die_with_parent else []
                child = subprocess.Popen(
                    [self.python, "-I", SUPERVISOR, str(exit_path), *watch, "--", *argv],
                    cwd=cwd,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # its own process group: a kill reaches the agent's children too
                )
            except OSError as exc:
                raise SpawnError(f"rollout {rollout.id!r}: could not start {argv[0]!r} in {cwd!r}: {exc}") from exc
        self._children[handle] = child
        self._write_state(handle, state_path, child.pid, argv, cwd, list(env))
        return handle

    def _write_state(
        self, handle: str, state_path: Path, pid: int, argv: list[str], cwd: str | None, env_names: list[str]
    ) -> None:
        state = {
            "handle": handle,
            "pid": pid,
            "proc_start": (_proc_stat(pid) or (None, None))[1],
            "started_at": time.time(),
            "argv": argv,
            "cwd": cwd,
            "env_names": sorted(set(env_names)),  # names only: what withheld_env compares the host with
        }
        tmp = state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state))
        os.replace(tmp, state_path)

    def poll(self, handle: str) -> RunStatus:
        state = self._state(handle)
        if state is None:
            return RunStatus(RunPhase.LOST, message=f"no local state for attempt {handle} (never started here?)")
        pid = int(state["pid"])  # type: ignore[arg-type]
        started_at = float(state["started_at"])  # type: ignore[arg-type]
        child = self._children.get(handle)
        if self._running(handle, state):
            force_at = self._force_kill_at.get(handle)
            if force_at is not None and time.monotonic() >= force_at:
                _signal_group(pid, signal.SIGKILL)
            return RunStatus(RunPhase.RUNNING, started_at=started_at)
        if handle not in self._swept:
            self._swept.add(handle)
            # The leader is gone; anything left in its group (a tool server, a stuck grandchild) goes too.
            # Only when the pid is free, so a recycled pid's unrelated group is never hit.
            if child is not None or _pid_released(pid, state.get("proc_start")):
                _signal_group(pid, signal.SIGKILL)
        return self._outcome(handle, child, started_at)

    def _outcome(self, handle: str, child: subprocess.Popen[bytes] | None, started_at: float) -> RunStatus:
        try:
            outcome = json.loads(self._paths(handle)[2].read_text())
        except (OSError, ValueError):
            outcome = None
        if isinstance(outcome, dict) and "spawn_error" in outcome:
            return RunStatus(RunPhase.FAILED_TO_START, message=str(outcome["spawn_error"]), started_at=started_at)
        if isinstance(outcome, dict) and isinstance(outcome.get("exit_code"), int):
            return RunStatus(RunPhase.EXITED, exit_code=outcome["exit_code"], started_at=started_at)
        how = f" (supervisor exit status {child.returncode})" if child is not None else ""
        return RunStatus(
            RunPhase.LOST,
            message=f"attempt {handle} ended without recording an exit status{how}: killed, or the machine restarted",
            started_at=started_at,
        )

    def kill(self, handle: str, grace_s: float) -> None:
        if handle in self._force_kill_at:
            return  # already stopping; keep the first deadline
        state = self._state(handle)
        if state is not None and self._running(handle, state):
            _signal_group(int(state["pid"]), signal.SIGTERM)  # type: ignore[arg-type]
            self._force_kill_at[handle] = time.monotonic() + grace_s

    def _running(self, handle: str, state: dict[str, object]) -> bool:
        """The attempt's leader still runs: our child by its poll, else its pid checked to be the process we started."""
        child = self._children.get(handle)
        return child.poll() is None if child is not None else _is_ours(int(state["pid"]), state.get("proc_start"))  # type: ignore[arg-type]

    def reap_leftovers(self) -> list[str]:
        """Kill the process group of every attempt an earlier process left running; returns their handles.

        For a stack whose agents must not outlive it: where the parent-death signal did not fire
        (not Linux, or an agent that left its group), this is the sweep on the next start.
        """
        reaped = []
        for handle in self.handles():
            state = self._state(handle)
            if handle in self._children or handle in self._preloaded or state is None:
                continue
            pid = int(state["pid"])  # type: ignore[arg-type]
            if _is_ours(pid, state.get("proc_start")):
                _signal_group(pid, signal.SIGKILL)
                reaped.append(handle)
        return reaped

    def handles(self) -> list[str]:
        found = []
        for path in sorted(self.logs_dir.glob("*/*.state.json")):
            try:
                found.append(str(json.loads(path.read_text())["handle"]))
            except (OSError, ValueError, KeyError):
                continue  # a half-written state file: its process never got a pid recorded
        return found

    def release(self, handle: str) -> None:
        log_path, state_path, exit_path = self._paths(handle)
        if self.log_seal is not None and log_path.exists():
            try:
                self.log_seal.seal(log_path)
            except Exception:  # a full disk, an unreadable KEK: the attempt still ends; its log stays clear
                log.exception("cannot seal the log of attempt %s; %s stays in the clear", handle, log_path)
        state_path.unlink(missing_ok=True)
        exit_path.unlink(missing_ok=True)
        self._children.pop(handle, None)
        self._preloaded.discard(handle)
        self._force_kill_at.pop(handle, None)
        self._swept.discard(handle)

    def close(self) -> None:
        """Stop the zygotes of preloaded starts (attempts are the controller's to stop first)."""
        if self._preloader is not None:
            self._preloader.close()

    def launched(self, handle: str) -> dict[str, Any] | None:
        return None  # a local process runs the runner spec's command, nothing more to record

    def withheld_env(self, handle: str) -> list[str]:
        state = self._state(handle) or {}
        given = state.get("env_names")
        if not isinstance(given, list):
            return []  # started by an older runner that did not record them
        return sorted(set(self.base_env) - {str(name) for name in given})

    def log_tail(self, handle: str, max_bytes: int) -> str:
        path = self._paths(handle)[0]
        sealed = sealed_log(path)
        if self.log_seal is not None and not path.exists() and sealed.exists():
            try:
                data = self.log_seal.read(sealed)
                return data[max(0, len(data) - max_bytes) :].decode("utf-8", errors="replace")
            except Exception:  # altered, or sealed under a KEK this controller lacks: said in the log
                log.exception("cannot open the sealed log %s", sealed)
                return ""
        try:
            with path.open("rb") as f:
                size = f.seek(0, os.SEEK_END)
                f.seek(max(0, size - max_bytes))
                return f.read().decode("utf-8", errors="replace")
        except OSError:
            return ""


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is already empty
        os.killpg(pgid, sig)


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state letter, start time in clock ticks since boot) from /proc; None where /proc is absent."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return ("X", 0) if Path("/proc/self/stat").exists() else None
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()  # the command name may contain spaces and parentheses
    return fields[0], int(fields[19])


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _pid_released(pid: int, proc_start: object) -> bool:
    """True when `pid` can name only our old group: free, or still our own unreaped zombie."""
    if not _pid_exists(pid):
        return True
    stat = _proc_stat(pid)
    return stat is not None and stat[0] in ("Z", "X") and stat[1] == proc_start


def _is_ours(pid: int, proc_start: object) -> bool:
    """Is `pid` still the live process we started (not a zombie, not a recycled pid)?"""
    if not _pid_exists(pid):
        return False
    stat = _proc_stat(pid)
    if stat is None:
        return True  # no /proc (macOS): a live pid is the best evidence there is
    letter, ticks = stat
    if letter in ("Z", "X"):
        return False
    return proc_start is None or ticks == proc_start
