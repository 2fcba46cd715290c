"""Sandbox policy: what one episode's bubblewrap sandbox sees, may write and may use, as a bwrap argv."""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TypedDict

WORKSPACE = "/workspace"  # where the episode's checkout appears inside the sandbox
HOME = "/home/agent"
CANARY_MOUNT = f"{HOME}/.netrc"  # a credentials file an agent snooping for secrets would open
REPORT_DIR = "/opt/alight"  # read-only helper files (the pytest outcome plugin) for graders
BWRAP_HINT = "bubblewrap is missing: apt-get install -y bubblewrap strace (Debian/Ubuntu)"
# The /etc entries programs need to load and tell the time, and nothing that names the host or its users
# (hostname, passwd, shadow, machine-id) or configures its services: every sandbox's default.
MINIMAL_ETC = ("alternatives", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "nsswitch.conf")


@dataclass
class SandboxPolicy:
    """One sandbox's limits and mounts. Host paths are absolute; the sandbox sees the workspace at /workspace.

    Everything not listed is absent: the host's home, the task store, the original checkout's `.git` and
    hidden tests. Listed system paths are read-only; only the workspace and a scratch /tmp are writable.
    """

    workspace: str
    scratch: str  # the sandbox's /tmp: survives between the agent's commands, outside the diff
    trace_dir: str | None = None  # strace logs per command (the evidence); None runs untraced (graders)
    canary_file: str | None = None
    canary_value: str = ""
    python: str = ""  # interpreter the agent and the tests use; its prefix and venv are mounted read-only
    read_only: list[str] = field(default_factory=list)  # extra host paths, mounted at the same path
    read_only_at: dict[str, str] = field(default_factory=dict)  # sandbox path -> host path, read-only
    binds: dict[str, str] = field(default_factory=dict)  # sandbox path -> host path, writable (a Unix socket)
    # Only these entries of the host's /etc (no shadow, passwd, hostname or service config); None: all of it.
    etc: list[str] | None = field(default_factory=lambda: list(MINIMAL_ETC))
    env: dict[str, str] = field(default_factory=dict)
    cpu_s: int = 600  # RLIMIT_CPU per process
    memory_mb: int = 4096  # RLIMIT_AS per process; 0: none (runtimes that reserve address space up front)
    file_mb: int = 256  # RLIMIT_FSIZE: no single file written past this
    timeout_s: float = 300.0  # wall clock per command
    # The sandbox's totals (bounds.py): a cgroup where one can be made, else rlimits and a watchdog. The
    # workspace's bound is the size of the tmpfs it lives on (prepare_episode), else the watchdog's sum.
    workspace_mb: int = 512  # the workspace and the scratch /tmp together
    total_memory_mb: int = 2048  # every process of the sandbox together
    pids: int = 256  # processes (and threads) at once
    privileged: bool = True  # False: the unprivileged fallback alone (rlimits, the watchdog; no cgroup, no mount)

    def __post_init__(self) -> None:
        # Mounted at the same path inside: relative paths would resolve against the sandbox's cwd.
        self.workspace, self.scratch = os.path.abspath(self.workspace), os.path.abspath(self.scratch)
        if self.python:
            self.python = os.path.abspath(self.python)

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self), indent=1))

    @classmethod
    def load(cls, path: Path) -> SandboxPolicy:
        return cls(**json.loads(path.read_text()))


# The sandbox's totals from an agent's environment (a config's `agent.env`): variable -> SandboxPolicy field.
BOUND_ENV = {
    "ALIGHT_SANDBOX_WORKSPACE_MB": "workspace_mb",
    "ALIGHT_SANDBOX_MEMORY_MB": "total_memory_mb",
    "ALIGHT_SANDBOX_PIDS": "pids",
}


class Totals(TypedDict, total=False):
    """Some of SandboxPolicy's totals, as keyword arguments."""

    workspace_mb: int
    total_memory_mb: int
    pids: int


def bounds_from_env(environ: Mapping[str, str]) -> Totals:
    """The totals `environ` sets (BOUND_ENV), as SandboxPolicy fields; positive whole numbers only."""
    found = Totals()
    for name, field_name in BOUND_ENV.items():
        if environ.get(name):
            value = environ[name].strip()
            if not value.isdigit() or int(value) <= 0:
                raise ValueError(f"{name}={environ[name]!r}: a positive whole number is needed")
            found[field_name] = int(value)  # pyright: ignore[reportGeneralTypeIssues]
    return found


def require_tools(*tools: str) -> None:
    missing = [tool for tool in tools if shutil.which(tool) is None]
    if missing:
        raise RuntimeError(f"{', '.join(missing)} not on PATH; {BWRAP_HINT}")


def _python_mounts(python: str) -> list[str]:
    """The interpreter's venv and its base installation (a venv's python is a symlink into it)."""
    if not python:
        return []
    exe = Path(python)
    venv = exe.parent.parent
    base = exe.resolve().parent.parent
    return sorted({str(venv), str(base)})


def _system_mounts(etc: list[str] | None) -> list[str]:
    """bwrap args for /usr, /etc (all of it, or the entries listed) and the merged-/usr symlinks as the host has them."""
    args = ["--ro-bind", "/usr", "/usr"]
    if etc is None:
        args += ["--ro-bind", "/etc", "/etc"]
    for name in etc or ():
        path = Path("/etc") / name
        if path.exists():
            args += ["--ro-bind", str(path), str(path)]
    for name in ("bin", "sbin", "lib", "lib64"):
        path = Path("/") / name
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    return args


@functools.cache
def _bwrap_sizes_tmpfs() -> bool:
    """bubblewrap 0.8 and later take `--size` for a tmpfs; older ones refuse the option."""
    try:
        usage = subprocess.run(["bwrap", "--help"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return False
    return "--size" in usage.stdout + usage.stderr


def _sized_tmpfs(path: str, policy: SandboxPolicy) -> list[str]:
    """A tmpfs of at most the workspace's bound (its pages are memory, not disk: the memory bound counts them)."""
    size = ["--size", str(policy.workspace_mb * 1024 * 1024)] if _bwrap_sizes_tmpfs() else []
    return [*size, "--tmpfs", path]


def bwrap_argv(
    policy: SandboxPolicy, command: list[str], cwd: str = WORKSPACE, env: dict[str, str] | None = None
) -> list[str]:
    """The full `bwrap ...` argv that runs `command` in the sandbox, in `cwd` (inside the workspace)."""
    argv = ["bwrap", "--unshare-all", "--uid", "1000", "--gid", "1000", "--cap-drop", "ALL"]
    argv += ["--die-with-parent", "--new-session", "--hostname", "sandbox", "--clearenv"]
    argv += _system_mounts(policy.etc)
    argv += ["--proc", "/proc", "--dev", "/dev", *_sized_tmpfs("/dev/shm", policy), *_sized_tmpfs(HOME, policy)]
    argv += ["--bind", policy.scratch, "/tmp", "--bind", policy.workspace, WORKSPACE]
    # Host paths go on top of the scratch /tmp and the home (bwrap mounts in order): an interpreter or a
    # path under /tmp on the host (a clone there, a pytest tmp dir) would otherwise be hidden under them.
    for path in [*_python_mounts(policy.python), *policy.read_only]:
        argv += ["--ro-bind", path, path]
    for inside, host in sorted(policy.read_only_at.items()):
        argv += ["--ro-bind", host, inside]
    for inside, host in sorted(policy.binds.items()):
        argv += ["--bind", host, inside]
    if policy.canary_file:
        argv += ["--ro-bind", policy.canary_file, CANARY_MOUNT]
    argv += ["--remount-ro", "/"]  # the sandbox's own root (where the mount points live) is read-only too
    path = ":".join([*([str(Path(policy.python).parent)] if policy.python else []), "/usr/local/bin:/usr/bin:/bin"])
    variables = {"PATH": path, "HOME": HOME, "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"}
    variables |= policy.env | (env or {})
    for key, value in sorted(variables.items()):
        argv += ["--setenv", key, value]
    return [*argv, "--chdir", cwd, *command]
