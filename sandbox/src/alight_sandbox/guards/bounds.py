"""One sandbox's total bounds: processes, memory and the workspace's bytes, and the watchdog that stops it at one.

Per bound, the strongest mechanism the machine allows, recorded in `mechanisms` for the command's log:
- processes and memory: a cgroup of its own (cgroups.py) where this process may make one; else rlimits
  (RLIMIT_NPROC for a user other than root, whom the kernel exempts; RLIMIT_AS per process) and the
  watchdog, which sums the sandbox's processes and their resident memory;
- the workspace and the scratch /tmp: the size-bounded tmpfs they live on (disk.py), else the watchdog,
  which sums their bytes.
The watchdog polls every POLL_S (less often where a reading costs more) and kills the whole sandbox at
the first bound reached; a cgroup's own counters (a refused fork, an OOM kill) are read the same way, so
the episode stops at once either way.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import resource
import secrets
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from alight_sandbox.guards.cgroups import Cgroup, create_cgroup
from alight_sandbox.guards.disk import TMPFS, is_bounded
from alight_sandbox.guards.policy import SandboxPolicy

POLL_S = 0.02  # the cheap readings; the fallback's scans come as often as their cost allows
MB = 1024 * 1024
PAGE = os.sysconf("SC_PAGE_SIZE")
WATCHDOG = "watchdog"
FALLBACK_NICE = 10  # CFS weight 110 against the watchdog's 1024
FULL_MARGIN = MB  # a bounded filesystem with less than this left is full


@dataclass
class Bounds:
    policy: SandboxPolicy
    cgroup: Cgroup | None
    disk_mounted: bool
    hit: str = ""  # what bound the sandbox reached: the evidence ('' none)
    mechanisms: dict[str, str] = field(default_factory=dict[str, str])
    host_tasks: int = 0  # the host's task count as the sandbox started: the fallback's fork trigger
    next_scan: float = 0.0  # when the fallback's next full scan is due (time.monotonic)
    tree: list[int] = field(default_factory=list[int])  # the sandbox's processes at the fallback's last scan

    def preexec(self) -> None:
        """In the sandbox's first process, before bwrap starts: join the cgroup, or set the fallback rlimits."""
        if self.cgroup is not None:
            self.cgroup.join()
            return
        # The watchdog must get the CPU a fork bomb wants: the sandbox runs at a lower priority than it.
        os.nice(FALLBACK_NICE)
        if os.geteuid() != 0:  # RLIMIT_NPROC counts every process of this user: ours plus the sandbox's
            limit = _user_processes(os.getuid()) + self.policy.pids
            resource.setrlimit(resource.RLIMIT_NPROC, (limit, limit))

    def check(self, root_pid: int) -> str:
        """The first bound reached, as evidence ('' none). The cheap readings every time; the fallback's scans of
        the process tree and the folders when due (a scan that costs more comes later: at most about a tenth of
        a core), and at once when the host's task count grew by the pids bound (a fork bomb outgrows any delay)."""
        if self.cgroup is not None and (found := self.cgroup.hit()):
            return found
        if self.disk_mounted and (found := self._disk_hit()):
            return found
        forking = self.cgroup is None and _host_tasks() - self.host_tasks >= self.policy.pids
        if not forking and time.monotonic() < self.next_scan:
            return ""
        started = time.monotonic()
        found = self._scan(root_pid)
        self.next_scan = time.monotonic() + 10 * (time.monotonic() - started)
        return found

    def _scan(self, root_pid: int) -> str:
        policy = self.policy
        if self.cgroup is None:
            self.tree, rss = _tree_usage(root_pid)
            count = len(self.tree)
            if count >= policy.pids:
                return f"pids limit {policy.pids} reached ({count} processes)"
            if rss >= policy.total_memory_mb * MB:
                return f"memory limit {policy.total_memory_mb} MB reached ({rss // MB} MB resident)"
        return "" if self.disk_mounted else self._disk_hit()

    def _disk_hit(self) -> str:
        policy = self.policy
        if self.disk_mounted:
            stat = os.statvfs(policy.workspace)
            used, size = (stat.f_blocks - stat.f_bfree) * stat.f_frsize, stat.f_blocks * stat.f_frsize
            full = stat.f_bavail * stat.f_frsize < FULL_MARGIN
        else:
            used = sum(_folder_bytes(Path(f)) for f in (policy.workspace, policy.scratch))
            size = policy.workspace_mb * MB
            full = used >= size
        return f"workspace reached {used // MB} MB of {size // MB} MB" if full else ""

    def watch(self, root_pid: int, stop: Callable[[], None]) -> Callable[[], None]:
        """Poll the bounds while the sandbox runs; at the first one reached, record it and call `stop`.

        Returns the function that ends the watch (and takes a last reading, for a command that ended at once)."""
        done = threading.Event()

        def poll() -> None:
            while not done.wait(POLL_S):
                found = self.check(root_pid)
                if found:
                    self.hit = self.hit or found
                    stop()
                    self._kill()
                    return

        thread = threading.Thread(target=poll, name="sandbox-bounds", daemon=True)
        thread.start()

        def end() -> None:
            done.set()
            thread.join()
            if not self.hit and self.cgroup is not None:
                self.hit = self.cgroup.hit()
            if not self.hit:
                self.hit = self._disk_hit()

        return end

    def _kill(self) -> None:
        """Everything in the sandbox. Killing bwrap alone leaves its pid namespace to its init, which reaps a
        fork bomb's children one by one before it exits (measured: 300 ms more of forking); killing the init
        (in the fallback's last scan) tears the namespace down at once."""
        if self.cgroup is not None:
            self.cgroup.kill()
        for pid in self.tree:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)

    def close(self) -> None:
        if self.cgroup is not None:
            self.cgroup.remove()


def open_bounds(policy: SandboxPolicy) -> Bounds:
    """A sandbox's bounds: a fresh cgroup unless the policy asks for the fallback, and how each bound applies."""
    name = f"{group_prefix(policy)}{secrets.token_hex(6)}"
    cgroup = create_cgroup(name, policy.pids, policy.total_memory_mb) if policy.privileged else None
    disk_mounted = is_bounded(policy.workspace)
    root = os.geteuid() == 0
    fallback_pids = f"{WATCHDOG} (root is exempt from RLIMIT_NPROC)" if root else f"RLIMIT_NPROC + {WATCHDOG}"
    mechanisms = {
        "pids": cgroup.mechanism if cgroup else fallback_pids,
        "memory": cgroup.mechanism if cgroup else f"RLIMIT_AS per process + {WATCHDOG} (resident total)",
        "disk": TMPFS if disk_mounted else f"{WATCHDOG} (folder sizes) + RLIMIT_FSIZE",
        "wall": "timeout per command",
    }
    return Bounds(policy, cgroup, disk_mounted, mechanisms=mechanisms, host_tasks=_host_tasks())


def group_prefix(policy: SandboxPolicy) -> str:
    """The start of the names of a workspace's cgroups: which episode a group belongs to, at a glance."""
    return f"alight-{hashlib.sha1(policy.workspace.encode()).hexdigest()[:8]}-"


def _host_tasks() -> int:
    """Every task (process or thread) on the host now: one small read, the last field of /proc/loadavg."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        return int(Path("/proc/loadavg").read_text().split()[3].split("/")[1])
    return 0


def _user_processes(uid: int) -> int:
    count = 0
    for entry in os.scandir("/proc"):
        with contextlib.suppress(OSError):
            if entry.name.isdigit() and entry.stat().st_uid == uid:
                count += 1
    return count


def _tree_usage(root_pid: int) -> tuple[list[int], int]:
    """(the processes, their resident bytes) of `root_pid` and everything under it, from /proc."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = Path(entry.path, "stat").read_text().rpartition(")")[2].split()
            pid = int(entry.name)
            children.setdefault(int(fields[1]), []).append(pid)
            rss[pid] = int(fields[21]) * PAGE
    seen: list[int] = []
    todo = [root_pid]
    while todo:
        pid = todo.pop()
        seen.append(pid)
        todo.extend(children.get(pid, ()))
    return seen, sum(rss.get(pid, 0) for pid in seen)


def _folder_bytes(root: Path) -> int:
    total = 0
    for folder, _, names in os.walk(root):
        for name in names:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(folder, name)).st_blocks * 512
    return total
