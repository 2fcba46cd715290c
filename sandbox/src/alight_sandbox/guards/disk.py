"""A size-bounded home for an episode's writable folders: one tmpfs of N MB that they all live on.

The workspace and the scratch /tmp keep their host paths (bind mounts of folders on the tmpfs), so every
command of the episode, the diff and the graders read them as before; the bytes never reach the host's
disk, and a write past the bound fails with ENOSPC. Making the mounts needs CAP_SYS_ADMIN (root); where it is
missing `bound_folders` returns False and the watchdog (bounds.py) measures the folders instead.
`release_folders` copies the contents back onto the disk (at most the bound) and unmounts.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

MS_BIND = 4096
MNT_DETACH = 2
TMPFS = "tmpfs --size"  # the mechanism's name in a command's bounds


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def _mount(source: str, target: Path, fstype: str | None, flags: int, options: str | None) -> bool:
    encoded = options.encode() if options else None
    done = _libc().mount(source.encode(), str(target).encode(), fstype and fstype.encode(), flags, encoded)
    return done == 0


def _unmount(target: Path) -> None:
    _libc().umount2(str(target).encode(), MNT_DETACH)


def is_bounded(folder: str | Path) -> bool:
    """Whether `folder` is one of our bind mounts onto a tmpfs (its size is then the kernel's to enforce)."""
    path = os.path.realpath(folder)
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            fields = line.split(" - ")
            if fields[0].split()[4] == path and len(fields) > 1 and fields[1].split()[0] == "tmpfs":
                return True
    return False


def _move_contents(source: Path, target: Path) -> None:
    target.mkdir(parents=True, exist_ok=True)
    for entry in sorted(source.iterdir()):
        if entry.is_dir() and not entry.is_symlink():
            shutil.copytree(entry, target / entry.name, symlinks=True)
            shutil.rmtree(entry)
        else:
            shutil.copy2(entry, target / entry.name, follow_symlinks=False)
            entry.unlink()


def bound_folders(holder: Path, folders: Sequence[Path], mb: int) -> bool:
    """Mount a tmpfs of `mb` MB at `holder` and move each folder onto it, bound back at its own path.

    False (nothing changed) where this process may not mount."""
    holder.mkdir(parents=True, exist_ok=True)
    if not _mount("alight-workspace", holder, "tmpfs", 0, f"size={mb}m,mode=0755"):
        return False
    try:
        for folder in folders:
            _move_contents(folder, holder / folder.name)
            if not _mount(str(holder / folder.name), folder, None, MS_BIND, None):
                raise OSError(ctypes.get_errno(), f"bind mount of {holder / folder.name} on {folder} failed")
    except BaseException:
        release_folders(holder, folders)
        raise
    return True


def release_folders(holder: Path, folders: Sequence[Path]) -> None:
    """Unmount the folders (their contents copied back onto the disk, for inspection) and the tmpfs."""
    for folder in folders:
        if not is_bounded(folder):
            continue
        kept = holder / folder.name
        _unmount(folder)
        with contextlib.suppress(OSError):
            _move_contents(kept, folder)
    if is_bounded(holder):
        _unmount(holder)
    with contextlib.suppress(OSError):
        holder.rmdir()
