"""One command in the sandbox: bwrap under strace (the evidence), with rlimits and a wall-clock limit."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import resource
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from alight_sandbox.guards.bounds import Bounds, open_bounds
from alight_sandbox.guards.policy import WORKSPACE, SandboxPolicy, bwrap_argv

# What the gates read: file opens, executions, network calls and namespace changes to the filesystem.
TRACED = (
    "execve,execveat,clone,clone3,fork,vfork,chdir,open,openat,openat2,creat,connect,sendto,sendmsg,"
    "unlink,unlinkat,rename,renameat,renameat2,mkdir,mkdirat,rmdir,truncate,symlink,symlinkat,link,linkat"
)
Streams = Literal["merged", "split", "inherit"]


def _load_signal_on_parent_death() -> Callable[[int], bool]:
    """The SDK's alight/parent_death.py, loaded alone where the SDK is not imported yet (as the attempt supervisor
    loads it): the launcher, started for every command an agent runs, would spend 0.13 of its 0.15 CPU-s start
    importing the `alight` package."""
    loaded = sys.modules.get("alight.parent_death")
    if loaded is not None:
        return loaded.signal_on_parent_death
    package = importlib.util.find_spec("alight")  # finds the package without running its __init__
    folders = package.submodule_search_locations if package else None
    if not folders:
        raise ImportError("the alight SDK is not installed in this interpreter")
    spec = importlib.util.spec_from_file_location("alight.parent_death", Path(folders[0]) / "parent_death.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.signal_on_parent_death


signal_on_parent_death = _load_signal_on_parent_death()


@dataclass
class CommandResult:
    returncode: int
    output: str
    timed_out: bool = False
    errors: str = ""  # stderr, when run with streams="split"
    resource_limit: str = ""  # the total bound the sandbox reached and was killed at ('' none): the evidence
    bounds: dict[str, str] = field(default_factory=dict[str, str])  # bound -> the mechanism that applied


def _limits(policy: SandboxPolicy, bounds: Bounds) -> None:
    """preexec: rlimits inherited by everything in the sandbox, its cgroup; die with the caller (a killed agent)."""
    mb = 1024 * 1024
    file_bytes = min(policy.file_mb, policy.workspace_mb) * mb
    address_space = (policy.memory_mb * mb, policy.memory_mb * mb)
    resource.setrlimit(resource.RLIMIT_CPU, (policy.cpu_s, policy.cpu_s))
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))
    bounds.preexec()
    signal_on_parent_death(signal.SIGKILL)
    # Last: this fork of a large process already maps more than the sandbox may, so any allocation after the
    # address-space bound (joining the cgroup writes a file) could fail, now and then, as MemoryError.
    if policy.memory_mb > 0:
        resource.setrlimit(resource.RLIMIT_AS, address_space)


def sandbox_argv(
    policy: SandboxPolicy, command: list[str], trace: Path | None, cwd: str, env: dict[str, str]
) -> list[str]:
    argv = bwrap_argv(policy, command, cwd=cwd, env=env)
    if trace is None:
        return argv
    # -y names each fd's path (AT_FDCWD</workspace/sub>), so relative paths resolve; -s keeps argv readable.
    return [
        "strace",
        "-f",
        "-qq",
        "-y",
        "-s",
        "512",
        "-e",
        f"trace={TRACED}",
        "-e",
        "signal=none",
        "-o",
        str(trace),
        *argv,
    ]


def run_command(
    policy: SandboxPolicy,
    command: list[str],
    *,
    cwd: str = WORKSPACE,
    env: dict[str, str] | None = None,
    trace: Path | None = None,
    timeout_s: float | None = None,
    streams: Streams = "merged",
) -> CommandResult:
    """Run `command` in a fresh sandbox of `policy`, its output decoded leniently.

    `streams`: "merged" puts stdout and stderr together in `output`; "split" keeps stderr apart in `errors`
    (a check whose last stdout line is its score); "inherit" lets the command write to this process's
    own stdout and stderr as it runs (a long CLI episode's log), and both fields stay empty.
    """
    argv = sandbox_argv(policy, command, trace, cwd, env or {})
    bounds = open_bounds(policy)
    try:
        proc = subprocess.Popen(
            argv,
            stdout=None if streams == "inherit" else subprocess.PIPE,
            stderr={"merged": subprocess.STDOUT, "split": subprocess.PIPE, "inherit": None}[streams],
            stdin=subprocess.DEVNULL,
            # bwrap stays the sandbox's pid 1 with the environment it was started with, and a command inside
            # can read /proc/1/environ: it gets PATH to find its tools and nothing else of ours (a token).
            env={"PATH": os.environ.get("PATH", os.defpath)},
            start_new_session=True,
            preexec_fn=lambda: _limits(policy, bounds),
        )
        end_watch = bounds.watch(proc.pid, lambda: _kill(proc.pid))
        try:
            out, err = proc.communicate(timeout=timeout_s or policy.timeout_s)
            timed_out = False
        except subprocess.TimeoutExpired:
            _kill(proc.pid)
            out, err = proc.communicate()
            timed_out = True
        except BaseException:  # stopped while waiting (SIGTERM made SystemExit, Ctrl-C): the sandbox goes first
            _kill(proc.pid)
            proc.wait()
            raise
        end_watch()
    finally:
        bounds.close()
    return CommandResult(
        returncode=-9 if timed_out else proc.returncode,
        output=(out or b"").decode("utf-8", errors="replace"),
        timed_out=timed_out,
        errors=(err or b"").decode("utf-8", errors="replace"),
        resource_limit=bounds.hit,
        bounds=bounds.mechanisms,
    )


def _kill(pid: int) -> None:
    """The sandbox's process group: bwrap dies with it, and with bwrap its pid namespace, all of it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
