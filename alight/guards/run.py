"""One command in the sandbox: bwrap under strace (the evidence), with rlimits and a wall-clock limit."""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

from alight.guards.policy import WORKSPACE, SandboxPolicy, bwrap_argv

# What the gates read: file opens, executions, network calls and namespace changes to the filesystem.
TRACED = (
    "execve,execveat,clone,clone3,fork,vfork,chdir,open,openat,openat2,creat,connect,sendto,sendmsg,"
    "unlink,unlinkat,rename,renameat,renameat2,mkdir,mkdirat,rmdir,truncate,symlink,symlinkat,link,linkat"
)
_PR_SET_PDEATHSIG = 1


@dataclass
class CommandResult:
    returncode: int
    output: str
    timed_out: bool = False


def _limits(policy: SandboxPolicy) -> None:
    """preexec: rlimits inherited by everything in the sandbox; die with the caller (a killed agent)."""
    mb = 1024 * 1024
    resource.setrlimit(resource.RLIMIT_CPU, (policy.cpu_s, policy.cpu_s))
    resource.setrlimit(resource.RLIMIT_AS, (policy.memory_mb * mb, policy.memory_mb * mb))
    resource.setrlimit(resource.RLIMIT_FSIZE, (policy.file_mb * mb, policy.file_mb * mb))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


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
) -> CommandResult:
    """Run `command` in a fresh sandbox of `policy`; stdout and stderr together, decoded leniently."""
    argv = sandbox_argv(policy, command, trace, cwd, env or {})
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        preexec_fn=lambda: _limits(policy),
    )
    try:
        out, _ = proc.communicate(timeout=timeout_s or policy.timeout_s)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        timed_out = True
    text = out.decode("utf-8", errors="replace")
    return CommandResult(returncode=-9 if timed_out else proc.returncode, output=text, timed_out=timed_out)
