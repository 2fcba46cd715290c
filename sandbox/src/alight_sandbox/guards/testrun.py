"""A project's tests run in a sandbox: outcomes per pytest node id, and the failures' messages.

Each outcome is double-entry. pytest runs under the isolated runner (pytest_runner.py), and three sources
must agree before a grader may use it: the outcomes plugin's report and pytest's own JUnit XML, each written
into a named pipe this process drains while the tests run (code in the sandbox can add to them, never
rewrite what was written), and the exit status as bwrap hands it back. The plugin's report must also carry a
token the plugin alone read, from a pipe emptied before the project's code is imported: a report written in
its place (then an exit before pytest's own) is told apart. A disagreement is recorded in
`TestRun.disagreements`, the evidence of a forged report.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import threading
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from select import select as wait_readable

from alight_sandbox.guards.oracle import oracle_mounts, read_record
from alight_sandbox.guards.policy import REPORT_DIR, WORKSPACE, SandboxPolicy
from alight_sandbox.guards.run import CommandResult, run_command

PLUGIN = Path(__file__).with_name("pytest_outcomes.py")
RUNNER = Path(__file__).with_name("pytest_runner.py")
MAX_JUNIT_BYTES = 64 * 1024 * 1024
# pytest's own bin_xml_escape, character for character (its last range reads as "\u1000", "0-\u10FF", "FF").
_XML_ILLEGAL = re.compile("[^\u0009\u000a\u000d\u0020-\u007e\u0080-\ud7ff\ue000-\ufffd\u10000-\u10ffff]")


@dataclass
class TestRun:
    outcomes: dict[str, str]  # node id -> passed | failed | skipped
    messages: dict[str, str] = field(default_factory=dict)  # node id -> the failure's one-line message
    output: str = ""
    timed_out: bool = False
    coverage: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # file -> line -> node ids running it
    disagreements: list[str] = field(default_factory=list)  # where the outcome sources differ: a forged report
    replaced: list[str] = field(default_factory=list)  # pytest's own functions and classes replaced during the run
    oracle_reads: list[str] = field(default_factory=list)  # the code under test reading the tests (pytest_oracle.py)

    def passed(self, nodeids: Sequence[str]) -> int:
        return sum(self.outcomes.get(n) == "passed" for n in nodeids)


class _Pipe:
    """A named pipe the sandbox writes into while a thread here drains it: what was written stays written."""

    def __init__(self, path: Path) -> None:
        self.path = path
        os.mkfifo(path)
        os.chmod(path, 0o666)  # the sandbox's user is not this process's
        # Read and write: opening never blocks, and a writer that has not come yet is not an end of stream.
        self.fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)
        self.chunks: list[bytes] = []
        self.size = 0
        self.wake_read, self.wake = os.pipe()  # close() writes here: the drain ends at once, not at a poll's end
        self.thread = threading.Thread(target=self._drain, daemon=True)
        self.thread.start()

    def _drain(self) -> None:
        while True:
            ready, _, _ = wait_readable([self.fd, self.wake_read], [], [])
            if self.fd not in ready:  # woken with the pipe empty: the sandbox is gone, all it wrote was read
                return
            try:
                data = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                continue
            self.size += len(data)
            if self.size <= MAX_JUNIT_BYTES:
                self.chunks.append(data)

    def close(self) -> bytes | None:
        """What was written, once the sandbox is gone; None if nothing was or it ran past MAX_JUNIT_BYTES."""
        os.write(self.wake, b"x")
        self.thread.join()
        for fd in (self.fd, self.wake_read, self.wake):
            os.close(fd)
        self.path.unlink()
        return b"".join(self.chunks) if self.chunks and self.size <= MAX_JUNIT_BYTES else None


def _token_pipe(path: Path, token: str) -> int:
    """A named pipe holding `token` for the plugin to read once, before the project's code is imported; read, it
    is gone from there. Returns the write end, held open for the run (a reader then never sees an end of file)."""
    os.mkfifo(path)
    os.chmod(path, 0o644)  # the sandbox's user may read it, never write into it
    fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)
    os.write(fd, token.encode())
    return fd


def junit_key(nodeid: str) -> str:
    """A node id as pytest's JUnit XML names its test case (classname::name), escaped the same way."""
    path, bracket, params = nodeid.partition("[")
    names = path.split("::")
    names[0] = re.sub(r"\.py$", "", names[0].replace("/", "."))
    names[-1] += bracket + params
    name = _XML_ILLEGAL.sub(
        lambda m: f"#x{ord(m.group()):02X}" if ord(m.group()) <= 0xFF else f"#x{ord(m.group()):04X}", names[-1]
    )
    return f"{'.'.join(names[:-1])}::{name}"


def parse_junit(data: bytes) -> dict[str, str]:
    """classname::name -> passed | failed | skipped, from pytest's JUnit XML; ValueError unless one report."""
    try:
        root = ET.fromstring(data)
    except ET.ParseError as exc:
        raise ValueError(f"unparseable JUnit XML ({exc})") from None
    worst = {"passed": 0, "skipped": 1, "failed": 2}
    outcomes: dict[str, str] = {}
    for case in root.iter("testcase"):
        key = f"{case.get('classname', '')}::{case.get('name', '')}"
        tags = {child.tag for child in case}
        outcome = "failed" if tags & {"failure", "error"} else "skipped" if "skipped" in tags else "passed"
        if worst[outcome] >= worst[outcomes.get(key, "passed")]:
            outcomes[key] = outcome
    return outcomes


def disagreements(
    report: dict[str, object] | None, junit: bytes | None, returncode: int, token: str | None = None
) -> list[str]:
    """Where the plugin's report, the JUnit stream and the exit status tell different stories (empty: they agree).

    A test counts as passed in a source only if that source says so; absent and skipped agree with failed
    (a collection error is a JUnit case the plugin never sees, and it passes in neither). With `token`, the
    report must carry it: only the plugin read it, before the project's code was imported."""
    if report is None and junit is None:
        return []  # nothing reported at all: the run died before pytest finished, which fails every test
    if report is None or junit is None:
        missing = "the outcomes report" if report is None else "pytest's JUnit stream"
        return [f"{missing} is missing while the other exists (exit status {returncode})"]
    try:
        streamed = parse_junit(junit)
    except ValueError as exc:
        return [f"pytest's JUnit stream is not one report: {exc}; {len(junit)} bytes, starting {junit[:200]!r}"]
    outcomes = report.get("outcomes")
    if not isinstance(outcomes, dict):
        return [f"the outcomes report is not one report with outcomes: {str(report)[:300]}"]
    plugin = {junit_key(str(n)): str(o) for n, o in outcomes.items()}  # pyright: ignore[reportUnknownVariableType]
    found = [
        f"{key}: outcomes report {plugin.get(key, 'absent')}, JUnit {streamed.get(key, 'absent')}"
        for key in sorted(plugin.keys() | streamed.keys())
        if (plugin.get(key) == "passed") != (streamed.get(key) == "passed")
    ]
    if token is not None and report.get("token") != token:
        found.append("the outcomes report does not carry this run's token: the plugin did not write it")
    if report.get("exitstatus") != returncode:
        found.append(
            f"the outcomes report says exit status {report.get('exitstatus')!r}; the process exited {returncode}"
        )
    failed = "failed" in streamed.values() or "failed" in plugin.values()
    if returncode == 0 and failed:
        found.append("the process exited 0 while a test failed")
    if returncode == 1 and not failed:
        found.append("the process exited 1 (tests failed) while no test failed")
    return found


def run_tests(
    policy: SandboxPolicy,
    select: Sequence[str] | None = None,
    *,
    pythonpath: Sequence[str] = (),
    timeout_s: float | None = None,
    files: Sequence[str] = (),
    coverage: bool = False,
    tests: Sequence[str] | None = None,
) -> TestRun:
    """pytest in a fresh sandbox over `policy.workspace`; only the `select`ed node ids when given.

    `files` (relative to the workspace) limits collection to those test files; `coverage` also records which
    tests execute each workspace line (`policy.python` then needs `coverage` installed). With `tests` (the
    workspace's test folders and files) the oracle guard runs: the code under test may not read them.
    The project's own addopts are dropped (they name plugins such as pytest-cov that the sandbox lacks).
    """
    if not policy.python:
        raise ValueError("run_tests needs policy.python: an interpreter with pytest installed")
    name, scratch = uuid.uuid4().hex[:8], Path(policy.scratch)
    # The grader's files live on the host and appear read-only under /opt/alight: the selection cannot be
    # edited, and both reports are named pipes drained here, so a later writer can only add to them.
    host = tempfile.TemporaryDirectory(prefix="alight-grading-")
    report_pipe, junit_pipe = _Pipe(Path(host.name) / "outcomes.json"), _Pipe(Path(host.name) / "junit.xml")
    token = uuid.uuid4().hex
    token_fd = _token_pipe(Path(host.name) / "token", token)
    outcomes, junit = f"{REPORT_DIR}/outcomes-{name}.json", f"{REPORT_DIR}/junit-{name}.xml"
    mounts = {
        f"{REPORT_DIR}/pytest_outcomes.py": str(PLUGIN),
        f"{REPORT_DIR}/pytest_runner.py": str(RUNNER),
        outcomes: str(report_pipe.path),
        junit: str(junit_pipe.path),
        f"{REPORT_DIR}/token-{name}": str(Path(host.name) / "token"),
    }
    if select is not None:
        (Path(host.name) / "select.txt").write_text("\n".join(select) + "\n")
        mounts[f"{REPORT_DIR}/select-{name}.txt"] = str(Path(host.name) / "select.txt")
    oracle_pipe = _Pipe(Path(host.name) / "oracle.jsonl") if tests is not None else None
    argv = _pytest_argv(policy.python, name, pythonpath, (outcomes, junit), select is not None, coverage, files)
    if oracle_pipe is not None:  # installed before anything else; no rewriting hook holding pytest's session
        mounts |= oracle_mounts(tests or [], name, Path(host.name), oracle_pipe.path)
        argv[4:4], argv[len(argv) :] = ["--oracle", f"{REPORT_DIR}/oracle-{name}.json"], ["--assert=plain"]
    # The environment is ours alone: none of the caller's PYTHON* settings reach the grading interpreter.
    env = {k: v for k, v in policy.env.items() if not k.startswith("PYTHON")}
    policy = replace(policy, env=env, read_only_at={**policy.read_only_at, **mounts})
    # No plugins from the interpreter's other packages (anyio's costs a third of a small suite's start-up);
    # the project's own conftest files still load.
    # A fixed hash seed: failure messages that print sets or dicts read the same on every run.
    variables = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"}
    try:
        result = run_command(policy, argv, env=variables, timeout_s=timeout_s)
    finally:
        streamed, reported = junit_pipe.close(), report_pipe.close()
        guarded = (oracle_pipe.close() or b"") if oracle_pipe is not None else None  # None: no guard ran
        os.close(token_fd)
        host.cleanup()
    run = _test_run(result, _parse_report(reported), streamed, token, scratch / f"coverage-{name}.json")
    record = read_record(guarded, finished=reported is not None and not run.timed_out)
    run.oracle_reads, run.disagreements = record.reads, [*run.disagreements, *record.problems]
    return run


def _pytest_argv(
    python: str,
    name: str,
    pythonpath: Sequence[str],
    reports: tuple[str, str],
    selected: bool,
    coverage: bool,
    files: Sequence[str],
) -> list[str]:
    """The isolated runner's command line for run `name`: `reports` are where the outcomes and JUnit pipes are
    mounted; `selected`, that a select-`name`.txt is mounted too."""
    outcomes, junit = reports
    roots = [*(f"{WORKSPACE}/{p}".rstrip("/.") for p in pythonpath), WORKSPACE]
    argv = [python, "-s", "-P", f"{REPORT_DIR}/pytest_runner.py", ":".join(roots), "--"]
    # append: the folders pytest puts on sys.path for test modules and conftest files go after the
    # interpreter's own paths (prepend would put a tests folder's json.py ahead of the standard library).
    argv += ["-p", "no:cacheprovider", "-q", "-o", "addopts=", "--import-mode=append", f"--junitxml={junit}"]
    argv += ["--outcomes-out", outcomes, "--outcomes-token", f"{REPORT_DIR}/token-{name}"]
    if selected:
        argv += ["--outcomes-select", f"{REPORT_DIR}/select-{name}.txt"]
    if coverage:
        argv += ["--outcomes-coverage", f"/tmp/coverage-{name}.json"]
    if files:
        # Node ids stay relative to the workspace: with file arguments pytest would otherwise look for the
        # rootdir from those files' folder up, and the ids the caller selects by would not match.
        argv += ["--rootdir", WORKSPACE, *files]
    return argv


def _test_run(
    result: CommandResult, report: dict[str, object] | None, streamed: bytes | None, token: str, lines: Path
) -> TestRun:
    """The run's outcomes once its three sources are checked against each other; `lines` is its coverage file."""
    if result.timed_out:
        # Killed: its reports are not checked against an exit status, so none is believed (a forger could
        # write one and then wait out the clock). Every test of a run that did not finish fails.
        lines.unlink(missing_ok=True)
        return TestRun(outcomes={}, output=result.output, timed_out=True)
    forged = disagreements(report, streamed, result.returncode, token)
    if report is None:
        return TestRun(outcomes={}, output=result.output, disagreements=forged)
    outcomes, messages, replaced = report.get("outcomes"), report.get("messages"), report.get("replaced")
    return TestRun(
        outcomes={str(k): str(v) for k, v in outcomes.items()} if isinstance(outcomes, dict) else {},  # pyright: ignore[reportUnknownVariableType]
        messages={str(k): str(v) for k, v in messages.items()} if isinstance(messages, dict) else {},  # pyright: ignore[reportUnknownVariableType]
        output=result.output,
        coverage=json.loads(lines.read_text()) if lines.exists() else {},
        disagreements=forged,
        replaced=[str(name) for name in replaced] if isinstance(replaced, list) else [],  # pyright: ignore[reportUnknownVariableType]
    )


def _parse_report(data: bytes | None) -> dict[str, object] | None:
    """The plugin's report, or None when nothing was written; anything but one JSON object reads as {} (which
    then disagrees with the JUnit stream: more than one report was written into the pipe)."""
    if data is None:
        return None
    try:
        report = json.loads(data.decode(errors="replace"))
    except ValueError:
        return {}
    return report if isinstance(report, dict) else {}  # pyright: ignore[reportUnknownVariableType]
