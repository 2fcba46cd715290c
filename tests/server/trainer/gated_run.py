"""One gated `alight train` of the tiny model per session, into pipes as a CI job runs it, that several test files
read: test_eval_beside_a_run (its reports, gate and evaluations beside it) and test_progress_log (its log)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from filelock import FileLock

from alight_testing.tiny_run import tiny_run_config

# The gated run's evaluator: reward per word, one success, one half, one failure, so both intervals are wide.
SCORING = 'def score(task, trajectory):\n    return {"apple": 1.0, "kiwi": 0.5}.get(task["word"], 0.0)\n'
GATED_WORDS = ["apple", "kiwi", "fig", "plum"]


@dataclass(frozen=True)
class GatedRun:
    """What `alight train --gate` printed into pipes (each stream whole UTF-8 characters) and its config file."""

    config: Path
    stdout: str
    stderr: str


def pipe_env(encoding: str) -> dict[str, str]:
    """This environment as a CI job's log sees a command: no colour forced, the heartbeat every 0.25 s
    (ALIGHT_HEARTBEAT_S) instead of 20 s, COLUMNS=80, and Python's stdio in `encoding` (a host whose locale is
    not UTF-8)."""
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE")}
    return {**env, "ALIGHT_HEARTBEAT_S": "0.25", "COLUMNS": "80", "PYTHONIOENCODING": encoding}


def whole_utf8(printed: bytes) -> str:
    """`printed` decoded strictly: a character cut in half or written in the locale's encoding (a lone byte 0xB1
    for ±) fails the test here."""
    try:
        return printed.decode("utf-8")
    except UnicodeDecodeError as exc:
        pytest.fail(f"a broken character at byte {exc.start}: {printed[max(0, exc.start - 80) : exc.start + 8]!r}")


def _train_gated(folder: Path) -> None:
    """A one-step run of the tiny model, 3 held-out tasks x 2 samples, gated as a CI job gates it (--gate, JUnit XML
    and a Markdown summary in the config's folder), printing into pipes under a latin-1 locale."""
    (folder / "scoring.py").write_text(SCORING)
    agent = Path(__file__).parent / "agents" / "unscored_agent.py"
    raw = tiny_run_config(
        folder, f"{agent}:main", [{"word": w} for w in GATED_WORDS * 2], evaluator=f"{folder / 'scoring.py'}:score",
        dataset={"val": str(folder / "val.jsonl")}, validation={"samples_per_task": 2}, steps=1,
        prices={"sandbox_second": 0.001},  # the reports' cost lines: money from the run's own price table
        # each agent forked from one process that imported openai once (controller/zygote.py), not an interpreter
        # start and an openai import per rollout: how an agent starts is not what this run proves
        controller={"concurrency": 6, "preload": True},
    )  # fmt: skip
    (folder / "val.jsonl").write_text("".join(json.dumps({"word": w}) + "\n" for w in GATED_WORDS[:3]))
    config = folder / "config.yaml"
    config.write_text(json.dumps(raw))  # JSON is YAML
    alight = str(Path(sys.executable).parent / "alight")
    done = subprocess.run([alight, "train", str(config), "--gate", "--junit", str(folder / "train.xml"),
                           "--markdown", str(folder / "train.md")],
                          capture_output=True, stdin=subprocess.DEVNULL, env=pipe_env("latin-1"), timeout=600)  # fmt: skip
    # the evaluator scores by word alone, so the last validation scores as the first: no change, exit 3
    seen = done.stdout.decode("utf-8", "replace")[-4000:] + done.stderr.decode("utf-8", "replace")[-4000:]
    assert done.returncode == 3, seen
    (folder / "stdout").write_bytes(done.stdout)
    (folder / "stderr").write_bytes(done.stderr)


@pytest.fixture(scope="session")
def gated_run(tmp_path_factory: pytest.TempPathFactory) -> GatedRun:
    """One `alight train --gate` per session (test_eval_beside_a_run reads its reports and evaluates beside it,
    test_progress_log reads its log). Under xdist the first worker to get here trains into a folder all workers
    share (the standard FileLock recipe); the others wait for it. test_eval_beside_a_run is the one file that
    writes into the run's folder (its evaluations), and only after reading what the run printed."""
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # the session's folder, above each worker's own
    folder = shared / "gated-run"
    with FileLock(str(shared / "gated-run.lock")):
        if not (folder / "stderr").is_file():
            folder.mkdir(exist_ok=True)
            _train_gated(folder)
    return GatedRun(folder / "config.yaml", whole_utf8((folder / "stdout").read_bytes()),
                    whole_utf8((folder / "stderr").read_bytes()))  # fmt: skip
