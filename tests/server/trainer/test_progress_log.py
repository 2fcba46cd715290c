"""What `alight train` prints into a pipe, as a log keeps it: a heartbeat line with the phase and rollouts done of
total while rollouts run, each step's line when its update ends, and whole characters (`alight eval`'s: in
test_eval_compare).

The real commands run as subprocesses on the tiny model with stdout and stderr to pipes, the heartbeat every
0.25 s (ALIGHT_HEARTBEAT_S) instead of 20 s, COLUMNS=80 as a CI job might set it, and Python's stdio in latin-1
as a host whose locale is not UTF-8 sets it: what comes out must still be whole UTF-8 characters. The train run
is the session's gated run (gated_run.py), which test_eval_beside_a_run reads too.
"""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path

import pytest
from gated_run import GatedRun, pipe_env, whole_utf8
from rich.console import Console

from alight_server.trainer.report.heartbeat import HEARTBEAT_ENV, Heartbeat, heartbeat_interval

pytestmark = pytest.mark.timeout(300)

ALIGHT = str(Path(sys.executable).parent / "alight")
BEAT = re.compile(r"^\[\d+:\d\d:\d\d\] (?P<phase>[^:]+): (?P<done>\d+)/(?P<total>\d+) rollouts done")


def _printed(argv: list[str], encoding: str = "latin-1") -> tuple[str, str]:
    """stdout and stderr of the command, each decoded strictly (gated_run.py `whole_utf8`)."""
    done = subprocess.run(argv, capture_output=True, stdin=subprocess.DEVNULL, env=pipe_env(encoding), timeout=280)
    seen = done.stdout.decode("utf-8", "replace") + done.stderr.decode("utf-8", "replace")
    assert done.returncode == 0, seen[-6000:]
    return whole_utf8(done.stdout), whole_utf8(done.stderr)


@pytest.fixture(scope="module")
def train_log(gated_run: GatedRun) -> list[str]:
    """`alight train`'s stdout lines (the session's gated run, gated_run.py: printed into pipes under a latin-1
    locale, the heartbeat every 0.25 s): one step between the validation before training and the one after."""
    return gated_run.stdout.splitlines()


def _index(lines: list[str], start: str) -> int:
    found = [i for i, line in enumerate(lines) if line.startswith(start)]
    assert len(found) == 1, f"{start!r} starts {len(found)} lines of:\n" + "\n".join(lines)
    return found[0]


def test_a_heartbeat_says_how_many_validation_rollouts_are_done_of_how_many(train_log: list[str]) -> None:
    beats = [m for line in train_log if (m := BEAT.match(line))]
    before = [m for m in beats if m["phase"] == "validation before training"]
    after = [m for m in beats if m["phase"] == "validation after step 1"]
    assert before and after, "\n".join(train_log)
    assert {m["total"] for m in before + after} == {"6"}  # 3 held-out tasks, two samples each


def test_a_steps_line_prints_when_its_update_ends_before_the_next_validation(train_log: list[str]) -> None:
    step = _index(train_log, "step   1  reward")
    validation = _index(train_log, "step   1  val")
    during = [
        i for i, line in enumerate(train_log) if (m := BEAT.match(line)) and m["phase"] == "validation after step 1"
    ]
    assert step < min(during) < validation, "\n".join(train_log)  # a beat may still land after the val line


def test_step_one_says_its_rollouts_overlapped_the_first_validation(train_log: list[str]) -> None:
    line = train_log[_index(train_log, "step   1  reward")]
    assert re.search(r"\d+ tok/s \(overlapped validation\)", line), line
    assert re.search(r"time rollouts \d+\.\ds \(overlapped validation\) train", line), line


def test_the_before_after_table_keeps_its_after_column_in_a_pipe(train_log: list[str]) -> None:
    header = train_log[_index(train_log, "┃ metric")]
    assert header.rstrip().endswith("after ┃"), header
    rows = [line for line in train_log if line.startswith("│")]
    assert rows and all(line.count("│") == 4 for line in rows), "\n".join(rows)  # every cell closed on its line


# `alight eval` into a pipe (heartbeat on stderr, only the report on stdout, whole UTF-8 characters under a latin-1
# locale): test_eval_compare's comparison, run that way, so that no eval process of its own is started here


@pytest.mark.parametrize(("command", "encoding"), [("eval", "latin-1"), ("controller", "ascii")])
def test_help_into_a_pipe_is_whole_utf8_characters_in_closed_boxes(command: str, encoding: str) -> None:
    out, _ = _printed([ALIGHT, command, "--help"], encoding)
    boxed = [line for line in out.splitlines() if line.startswith(("╭", "│", "╰"))]
    assert boxed, out
    assert all(line.rstrip()[-1] in "╮│╯" for line in boxed), out


@pytest.mark.parametrize("value", ["0", "-1", "soon", "nan"])
def test_a_heartbeat_interval_that_is_not_positive_seconds_is_refused_by_name(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(HEARTBEAT_ENV, value)
    with pytest.raises(ValueError, match=f"ALIGHT_HEARTBEAT_S={value!r}: expected the seconds"):
        heartbeat_interval()


def test_a_heartbeat_prints_the_status_it_was_last_given_and_stops_without_waiting_out_its_interval() -> None:
    printed = io.StringIO()
    heartbeat = Heartbeat(Console(file=printed, width=200), interval_s=3600).start()
    heartbeat.status = "step 2 rollouts: 3/8 rollouts done, 5 running, 0 failed"
    assert heartbeat.line().endswith("] step 2 rollouts: 3/8 rollouts done, 5 running, 0 failed")
    heartbeat.stop()  # an hour's interval: only the stop event can end the wait
    assert printed.getvalue() == ""
