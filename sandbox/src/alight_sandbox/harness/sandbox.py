# pyright: strict
"""A CLI attempt inside the sandbox: what it sees, and the forwarder as its only way out.

The CLI and every command its shell tool runs share one bubblewrap sandbox (alight_sandbox.guards.policy): no
network namespace of the host's, the workspace read-write at /workspace, a tmpfs home with the CLI's
config files mounted read-only, the system and the CLI's own install read-only, /etc cut down to what
programs need to load (no hostname, users or service config), and an environment of the CLI's own
variables plus a short allowlist of the host's. The attempt token never enters: the CLI gets a
placeholder key and a base URL on the sandbox's loopback, where the relay (sandbox/src/alight_sandbox/guards/relay.py)
pipes to a Unix socket served by the Forwarder in this process, which adds the token to the attempt's own
calls only (its model calls, and its environment's MCP endpoint where the run serves one).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from alight import envvars
from alight_sandbox.guards.disk import is_bounded
from alight_sandbox.guards.forwarder import Forwarder
from alight_sandbox.guards.policy import HOME, MINIMAL_ETC, SandboxPolicy, bounds_from_env, require_tools
from alight_sandbox.guards.run import CommandResult, run_command
from alight_sandbox.harness.attempt import HarnessAttempt

RELAY_PORT = 8417  # on the sandbox's own loopback: nothing else listens there
RELAY_URL = f"http://127.0.0.1:{RELAY_PORT}"
PLACEHOLDER_KEY = "alight-sandbox-placeholder-key"  # the CLI insists on a key; the forwarder adds the real one
SOCKET_INSIDE = "/run/alight/gateway.sock"
RELAY_INSIDE = "/opt/alight/relay.py"
# Host variables the CLI keeps (language, time zone, terminal); the rest of the host's environment stays out.
INHERITED = ("LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM", "NO_COLOR")
INHERIT_ENV = "ALIGHT_HARNESS_INHERIT_ENV"  # comma-separated names of further host variables to pass in
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
DISK = "disk"  # under an attempt's root: the tmpfs its workspace and scratch folders live on
LONG_S = 24 * 3600  # the CLI's wall clock and CPU: the attempt's own timeout is the one that ends it
IDENTITY = {  # the sandbox's own identity files, in place of the host's
    "passwd": "agent:x:1000:1000:agent:/home/agent:/bin/bash\n",
    "group": "agent:x:1000:\n",
    "hostname": "sandbox\n",
    "hosts": "127.0.0.1 localhost\n::1 localhost\n",
    # Name lookups fail at once: a server no route leads to, and no wait. Without this file musl's resolver
    # (Codex is built with musl) asks 127.0.0.1:53 and waits 5 s per lookup for an answer that cannot
    # come (Codex looks up its analytics hosts as it exits: 7.3 s per episode instead of 2.2 s).
    "resolv.conf": "nameserver 192.0.2.1\noptions timeout:0 attempts:1\n",
}


@dataclass(frozen=True)
class CliLaunch:
    """How a harness starts its CLI: arguments, its own variables, and config files for its home."""

    argv: list[str]  # after the executable
    env: dict[str, str]  # the CLI's endpoint and switches; the host's environment is never merged in
    home_files: dict[str, str] = field(default_factory=dict[str, str])  # path under the sandbox's home -> content


def host_env() -> dict[str, str]:
    """The host variables a sandboxed command keeps: INHERITED, plus those $ALIGHT_HARNESS_INHERIT_ENV names.

    Selected as a runner selects an agent's (envvars.inherited_env): the attempt contract's variables never
    pass, and naming one is an error, since OPENAI_API_KEY and the OTLP headers carry the token as ALIGHT_TOKEN does.
    """
    named = [n.strip() for n in os.environ.get(INHERIT_ENV, "").split(",") if n.strip()]
    leaked = [n for n in named if envvars.reserved(n)]
    if leaked:
        raise ValueError(
            f"{INHERIT_ENV} names {leaked}: alight's own variables and the attempt contract's (they carry the "
            "attempt token) never enter the sandbox"
        )
    return envvars.inherited_env(os.environ, [*INHERITED, *named], defaults=False)


def _install_root(executable: Path) -> Path:
    """What of a CLI's install to mount: the node_modules it lives in (its native parts are sibling packages),
    else the executable alone (a self-contained binary; never the folder around it, which may be a home)."""
    for parent in executable.parents:
        if parent.name == "node_modules":
            return parent
    return executable


def _system_path(path: Path) -> bool:
    return path.is_relative_to("/usr") or path.parts[1:2] in (("bin",), ("lib",), ("lib64",), ("sbin",))


def _relay_python() -> tuple[str, list[str]]:
    """(interpreter, its prefix to mount) for the relay: the system's python3 if there is one, else ours."""
    system = shutil.which("python3", path="/usr/bin:/bin")
    if system and _system_path(Path(system).resolve()):
        return system, []
    return os.path.realpath(sys.executable), [sys.base_prefix]


def _identity_files(folder: Path) -> dict[str, str]:
    folder.mkdir(exist_ok=True)
    mounts: dict[str, str] = {}
    for name, content in IDENTITY.items():
        (folder / name).write_text(content)
        mounts[f"/etc/{name}"] = str(folder / name)
    return mounts


def base_policy(root: Path, work: Path, *, cpu_s: int, memory_mb: int, timeout_s: float) -> SandboxPolicy:
    """The attempt's sandbox without the CLI: its workspace and scratch /tmp, the minimal /etc, no network.

    Its totals are SandboxPolicy's defaults, or what $ALIGHT_SANDBOX_WORKSPACE_MB, _MEMORY_MB and _PIDS set;
    the scratch shares the workspace's tmpfs (DISK) when the attempt has one (cli_episode)."""
    require_tools("bwrap")
    return SandboxPolicy(
        workspace=str(work),
        # A fresh /tmp for each sandbox: what the CLI's commands left in theirs never reaches the check.
        scratch=tempfile.mkdtemp(prefix="tmp-", dir=root / DISK if is_bounded(work) else root),
        etc=list(MINIMAL_ETC),
        read_only_at=_identity_files(root / "etc"),
        cpu_s=cpu_s,
        memory_mb=memory_mb,
        timeout_s=timeout_s,
        **bounds_from_env(os.environ),
    )


def run_cli_sandboxed(
    binary: str, launch: CliLaunch, root: Path, work: Path, home: Path, attempt: HarnessAttempt
) -> CommandResult:
    """Run the CLI in the sandbox with the forwarder serving its attempt's calls; its output goes to our log.

    `home` (on the host) receives the config files for inspection; the sandbox mounts them read-only
    into its tmpfs home. The CLI's own writes (sessions, caches) stay in that tmpfs and vanish with it.
    """
    executable = Path(binary if os.sep in binary else shutil.which(binary) or binary).resolve()
    python, python_mounts = _relay_python()
    path, node_mounts = _node()
    policy = base_policy(root, work, cpu_s=LONG_S, memory_mb=0, timeout_s=LONG_S)
    policy.read_only = [str(_install_root(executable)), *python_mounts, *node_mounts]
    policy.read_only_at[RELAY_INSIDE] = str(Path(__file__).resolve().parent.parent / "guards" / "relay.py")
    for relative, content in launch.home_files.items():
        (home / relative).parent.mkdir(parents=True, exist_ok=True)
        (home / relative).write_text(content)
        policy.read_only_at[f"{HOME}/{relative}"] = str(home / relative)
    env = {"PATH": path, "SHELL": "/bin/bash", **host_env(), **launch.env}
    # AF_UNIX paths are short (108 bytes): a folder of its own under the system's temp dir, not the workspace's.
    sockets = Path(tempfile.mkdtemp(prefix="alight-gw-"))
    try:
        socket_path = sockets / "gateway.sock"
        policy.binds[SOCKET_INSIDE] = str(socket_path)
        with Forwarder(socket_path, attempt.gateway_url, attempt.token):
            command = [python, "-I", "-S", RELAY_INSIDE, str(RELAY_PORT), SOCKET_INSIDE, "--", str(executable)]
            return run_command(policy, [*command, *launch.argv], env=env, streams="inherit")
    finally:
        shutil.rmtree(sockets, ignore_errors=True)


def _node() -> tuple[str, list[str]]:
    """(PATH inside, what to mount): the system's PATH, after the folder of a `node` installed outside /usr."""
    node = shutil.which("node")
    if node and not _system_path(Path(node).resolve()):
        prefix = Path(node).resolve().parent.parent
        return f"{prefix / 'bin'}:{SYSTEM_PATH}", [str(prefix)]
    return SYSTEM_PATH, []
