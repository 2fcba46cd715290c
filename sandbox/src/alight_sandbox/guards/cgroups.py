"""One sandbox's cgroup: a bound on its processes and its total memory, made per sandbox and removed after.

cgroup v1 (a writable `pids` and `memory` hierarchy, as root on most hosts and CI runners) or cgroup v2
(where this process's own group delegates `pids` and `memory`); the group is a child of the one this
process is in, so a container's own bound still holds above it. None where neither is writable: the
caller falls back to rlimits and the watchdog (bounds.py).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
MB = 1024 * 1024
STALE_S = 60.0  # an empty group older than this lost its owner (killed before it could remove the group)


@dataclass
class Cgroup:
    version: int  # 1 or 2
    folders: list[Path]  # v1: the pids group, then the memory group; v2: the one group
    pids: int
    memory_mb: int

    @property
    def mechanism(self) -> str:
        return f"cgroup v{self.version}"

    def join(self) -> None:
        """Put the calling process in the group (a preexec hook: everything it starts inherits the group)."""
        for folder in self.folders:
            (folder / "cgroup.procs").write_text(str(os.getpid()))

    def hit(self) -> str:
        """What bound the group reached ('' none): the kernel's own counters, read after the fact too."""
        pids_events = self.folders[0] / "pids.events"
        if _counter(pids_events, "max") > 0:
            return f"pids limit {self.pids} reached (fork refused)"
        oom = self.folders[-1] / ("memory.oom_control" if self.version == 1 else "memory.events")
        if _counter(oom, "oom_kill") > 0:
            return f"memory limit {self.memory_mb} MB: OOM kill"
        return ""

    def processes(self) -> list[int]:
        pids: set[int] = set()
        for folder in self.folders:
            with contextlib.suppress(OSError):
                pids |= {int(p) for p in (folder / "cgroup.procs").read_text().split()}
        return sorted(pids)

    def kill(self) -> None:
        """SIGKILL everything in the group, until it is empty (a fork bomb forks while it is being killed)."""
        for _ in range(200):
            alive = self.processes()
            if not alive:
                return
            for pid in alive:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.01)

    def remove(self) -> None:
        """Kill what is left and remove the group (a group with processes in it cannot be removed)."""
        self.kill()
        for folder in reversed(self.folders):
            for _ in range(500):  # up to 5 s: on a loaded host the last processes take a while to be reaped
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:  # EBUSY: its last processes are still exiting
                    time.sleep(0.01)


def _counter(path: Path, name: str) -> int:
    with contextlib.suppress(OSError, ValueError):
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == name:
                return int(value)
    return 0


def _own_group(controller: str) -> str:
    """This process's group in a v1 hierarchy ('' for v2's unified line), from /proc/self/cgroup."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            return path
    return "/"


def _v1(name: str, pids: int, memory_mb: int) -> Cgroup:
    folders: list[Path] = []
    try:
        for controller in ("pids", "memory"):
            parent = ROOT / controller / _own_group(controller).lstrip("/")
            # A container may show its own group as the hierarchy's root.
            parent = parent if parent.is_dir() else ROOT / controller
            _sweep(parent)
            folder = parent / name
            folder.mkdir()
            folders.append(folder)
        group = Cgroup(1, folders, pids, memory_mb)
        (folders[0] / "pids.max").write_text(str(pids))
        (folders[1] / "memory.limit_in_bytes").write_text(str(memory_mb * MB))
        with contextlib.suppress(OSError):  # swap counted in the bound too, where the kernel accounts it
            (folders[1] / "memory.memsw.limit_in_bytes").write_text(str(memory_mb * MB))
        return group
    except OSError:
        for folder in reversed(folders):
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise


def _v2(name: str, pids: int, memory_mb: int) -> Cgroup:
    root = ROOT if (ROOT / "cgroup.controllers").exists() else ROOT / "unified"
    parent = root / _own_group("").lstrip("/")
    enabled = (parent / "cgroup.subtree_control").read_text().split()
    if not {"pids", "memory"} <= set(enabled):
        (parent / "cgroup.subtree_control").write_text("+pids +memory")  # fails unless delegated to us
    _sweep(parent)
    folder = parent / name
    folder.mkdir()
    try:
        (folder / "pids.max").write_text(str(pids))
        (folder / "memory.max").write_text(str(memory_mb * MB))
        with contextlib.suppress(OSError):
            (folder / "memory.swap.max").write_text("0")
    except OSError:
        folder.rmdir()
        raise
    return Cgroup(2, [folder], pids, memory_mb)


def _sweep(parent: Path) -> None:
    """Remove the groups of sandboxes whose owner was killed (an attempt timed out or cancelled: its `finally`
    never ran): `alight-*` groups with no process left, made over STALE_S ago."""
    now = time.time()
    for folder in parent.glob("alight-*"):
        with contextlib.suppress(OSError):
            if now - folder.stat().st_mtime > STALE_S and not (folder / "cgroup.procs").read_text().split():
                folder.rmdir()


def create_cgroup(name: str, pids: int, memory_mb: int) -> Cgroup | None:
    """A fresh group `name` bounding `pids` processes and `memory_mb` MB in all; None where none can be made."""
    if (ROOT / "pids" / "cgroup.procs").exists() and (ROOT / "memory" / "cgroup.procs").exists():
        with contextlib.suppress(OSError):
            return _v1(name, pids, memory_mb)
    if (ROOT / "cgroup.controllers").exists() or (ROOT / "unified" / "cgroup.controllers").exists():
        with contextlib.suppress(OSError):
            return _v2(name, pids, memory_mb)
    return None
