"""The oracle guard's settings and its record, on the grader's side (the guard itself is pytest_oracle.py).

The guard runs inside the grading sandbox and writes one JSON line per read into a named pipe the grader
drains: first `{"start": NONCE}`, then `{"read": EVIDENCE}` for each read, last `{"end": NONCE, "reads": N}`
once the tests have run. Anything else in the pipe was written by the project's code: a record whose end is
missing, carries another nonce or counts other reads than it holds was cut short or redirected.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from alight_sandbox.guards.policy import REPORT_DIR, WORKSPACE

GUARD = Path(__file__).with_name("pytest_oracle.py")


@dataclass
class OracleRecord:
    reads: list[str] = field(default_factory=list)  # evidence of each read, as the guard wrote it
    problems: list[str] = field(default_factory=list)  # why the record cannot be believed whole


def oracle_settings(tests: Sequence[str], record: str) -> dict[str, object]:
    """The guard's settings: `tests` are the workspace's test folders and files (relative), `record` the pipe."""
    return {
        "workspace": WORKSPACE,
        "tests": [f"{WORKSPACE}/{rel}".rstrip("/") for rel in tests],
        "private": [REPORT_DIR],  # the grader's own files: the selection, the reports, the guard's settings
        "record": record,
    }


def oracle_mounts(tests: Sequence[str], name: str, host: Path, record: Path) -> dict[str, str]:
    """The read-only mounts of run `name` that install the guard: the guard itself, its settings (written into
    `host`, the grader's folder) and its record, the pipe at `record`."""
    (host / "oracle.json").write_text(json.dumps(oracle_settings(tests, f"{REPORT_DIR}/oracle-{name}.jsonl")))
    return {
        f"{REPORT_DIR}/{GUARD.name}": str(GUARD),
        f"{REPORT_DIR}/oracle-{name}.json": str(host / "oracle.json"),
        f"{REPORT_DIR}/oracle-{name}.jsonl": str(record),
    }


def read_record(data: bytes | None, finished: bool) -> OracleRecord:
    """The reads in a guard's record (None: no guard ran); `finished`: pytest wrote its report, so the guard must
    have ended its record too."""
    lines = [line for line in (data or b"").decode(errors="replace").split("\n") if line]
    entries = []
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            entry = None
        entries.append(entry if isinstance(entry, dict) else {"unreadable": line[:200]})
    record = OracleRecord(reads=[str(e["read"]) for e in entries if "read" in e])
    if not entries:
        if finished and data is not None:
            record.problems.append("the oracle guard's record is missing: the guard did not run")
        return record
    nonce = entries[0].get("start")
    ends = [e for e in entries if "end" in e]
    if nonce is None or any(e.get("end") != nonce for e in ends) or len(ends) > 1:
        record.problems.append("the oracle guard's record holds lines the guard did not write")
    elif finished and not ends:
        record.problems.append("the oracle guard's record ends early: its pipe was closed or redirected")
    elif ends and ends[0].get("reads") != (held := sum("read" in e for e in entries[: entries.index(ends[0])])):
        # (Reads after the end line are code running at exit: reads all the same, outside the count.)
        what = f"it counted {ends[0].get('reads')} reads and the pipe holds {held}"
        record.problems.append(f"the oracle guard's record was redirected for a while: {what}")
    return record
