"""Evidence from the sandbox: strace logs parsed into file accesses, executions and network attempts."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

_CALL = re.compile(r"^(\d+)\s+(\w+)\((.*)\)\s+=\s+(.*)$")
_UNFINISHED = re.compile(r"^(\d+)\s+(\w+)\((.*?)\s*<unfinished \.\.\.>$")
_RESUMED = re.compile(r"^(\d+)\s+<\.\.\. (\w+) resumed>\s*(.*)\)\s+=\s+(.*)$")
_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')
_DIRFD = re.compile(r"^(?:AT_FDCWD|\d+)<([^>]*)>")
_FAMILY = re.compile(r"sa_family=(AF_\w+)")
_WRITE_FLAGS = ("O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC", "O_APPEND")
# Calls that change the filesystem's names; every path they name counts as written.
_NAME_CHANGES = {
    "unlink",
    "unlinkat",
    "rename",
    "renameat",
    "renameat2",
    "mkdir",
    "mkdirat",
    "rmdir",
    "truncate",
    "symlink",
    "symlinkat",
    "link",
    "linkat",
    "creat",
}
_OPENS = {"open", "openat", "openat2"}
_EXECS = {"execve", "execveat"}
_NETWORK = {"connect", "sendto", "sendmsg"}
_FORKS = {"clone", "clone3", "fork", "vfork"}
SANDBOX_SETUP = "bwrap"  # the sandbox's own mount setup is not the agent's doing


@dataclass
class Access:
    """One traced system call, reduced to what the gates judge."""

    syscall: str
    path: str = ""  # absolute, as the sandbox saw it
    write: bool = False
    ok: bool = True  # the call succeeded
    argv: list[str] = field(default_factory=list)  # for executions
    family: str = ""  # for network calls
    program: str = ""  # what the calling process was running (a forked child runs its parent's program)
    line: str = ""  # the raw trace line: the evidence a person reads

    def describe(self) -> str:
        return self.line[:400]


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), text)


def _resolve(args: str, syscall: str, cwd: str) -> list[str]:
    """Absolute paths a call names: relative ones resolve against the fd -y annotated, else the process's cwd."""
    strings = [_unescape(s) for s in _STRING.findall(args)]
    if syscall in _EXECS or syscall not in {
        "rename",
        "renameat",
        "renameat2",
        "link",
        "linkat",
        "symlink",
        "symlinkat",
    }:
        strings = strings[:1]
    base = cwd
    fd = _DIRFD.match(args)
    if fd:
        base = fd.group(1)
    return [posixpath.normpath(posixpath.join(base, s)) for s in strings if s]


def _argv(args: str) -> list[str]:
    bracket = args.find("[")
    if bracket < 0:
        return []
    end = args.find("]", bracket)
    return [_unescape(s) for s in _STRING.findall(args[bracket : end if end > 0 else len(args)])]


def _access(syscall: str, args: str, result: str, line: str, cwd: str) -> list[Access]:
    ok = not result.lstrip().startswith("-1")
    if syscall in _OPENS:
        write = any(flag in args for flag in _WRITE_FLAGS)
        return [Access(syscall, path=p, write=write, ok=ok, line=line) for p in _resolve(args, syscall, cwd)[:1]]
    if syscall in _EXECS:
        paths = _resolve(args, syscall, cwd)
        return [Access(syscall, path=paths[0] if paths else "", ok=ok, argv=_argv(args), line=line)]
    if syscall in _NETWORK:
        family = _FAMILY.search(args)
        if family is None:  # sendto on a connected socket: its connect() was already seen
            return []
        return [Access(syscall, family=family.group(1), ok=ok, line=line)]
    if syscall in _NAME_CHANGES:
        return [Access(syscall, path=p, write=True, ok=ok, line=line) for p in _resolve(args, syscall, cwd)]
    return []


class _Processes:
    """Per traced pid: the program it runs (set by execve) and its cwd; both inherited through clone/fork."""

    def __init__(self, cwd: str) -> None:
        self.by_pid: dict[str, str] = {}
        self.cwd: dict[str, str] = {}
        self.start_cwd = cwd

    def cwd_of(self, pid: str, args: str) -> str:
        fd = _DIRFD.match(args)
        if fd and args.startswith("AT_FDCWD"):
            self.cwd[pid] = fd.group(1)  # -y names the cwd on every *at call: the freshest view of it
        return self.cwd.get(pid, self.start_cwd)

    def follow(self, pid: str, syscall: str, args: str, result: str, accesses: list[Access]) -> list[Access]:
        head = result.split(" ", 1)[0]
        if syscall in _FORKS and head.isdigit():
            self.by_pid[head] = self.by_pid.get(pid, "")
            self.cwd[head] = self.cwd.get(pid, self.start_cwd)
        elif syscall == "chdir" and head == "0":
            target = _STRING.findall(args)
            if target:
                self.cwd[pid] = posixpath.normpath(
                    posixpath.join(self.cwd.get(pid, self.start_cwd), _unescape(target[0]))
                )
        program = self.by_pid.get(pid, "")
        for access in accesses:
            access.program = program
            if access.syscall in _EXECS and access.ok:
                self.by_pid[pid] = access.program = posixpath.basename(access.path)
        return [a for a in accesses if a.program != SANDBOX_SETUP]


def parse_trace(lines: Iterator[str] | list[str], cwd: str = "/workspace") -> Iterator[Access]:
    """Accesses in one strace -f -y log, with interrupted calls (`<unfinished ...>`) joined to their ends.
    What bwrap itself does while setting up the sandbox is left out."""
    pending: dict[tuple[str, str], str] = {}
    processes = _Processes(cwd)
    for raw in lines:
        line = raw.rstrip("\n")
        match = _CALL.match(line)
        if match:
            pid, syscall, args, result = match.groups()
        elif match := _UNFINISHED.match(line):
            pending[(match.group(1), match.group(2))] = match.group(3)
            continue
        elif match := _RESUMED.match(line):
            pid, syscall, rest, result = match.groups()
            args = pending.pop((pid, syscall), "") + rest
        else:
            continue
        here = processes.cwd_of(pid, args)
        yield from processes.follow(pid, syscall, args, result, _access(syscall, args, result, line, here))


def read_traces(trace_dir: Path) -> list[Access]:
    """Every access in every trace of an episode, in command order (names sort by start time)."""
    accesses: list[Access] = []
    for path in sorted(trace_dir.glob("trace-*.log")):
        with path.open(errors="replace") as lines:
            accesses.extend(parse_trace(lines))
    return accesses
