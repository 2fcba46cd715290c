"""What the review queue shows of a real episode: the grade's `episode` event carries the workspace diff and the
commands the agent ran through the launcher, each with its exit status."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from guards_testkit import FAIL_TO_PASS, FIX, PASS_TO_PASS

from alight.evaluation import EPISODE
from alight_sandbox.guards import Episode, grade_episode
from alight_sandbox.guards.grade import grade_events


def test_the_episode_event_carries_the_diff_and_each_command_with_its_exit_status(
    episode: Episode, checkout: Path, agent: Callable[[str], object]
) -> None:
    agent(FIX)
    agent("cat no-such-file")
    result = grade_episode(episode, checkout, FAIL_TO_PASS, PASS_TO_PASS)
    (event,) = [e for e in grade_events(result, attempt=1) if e.kind == EPISODE]
    assert "-    return a - b" in event.payload["diff"] and "+    return a + b" in event.payload["diff"]
    assert event.payload["command_lines"] == [
        {"command": FIX, "returncode": 0, "timed_out": False},  # the script, as the agent wrote it
        {"command": "cat no-such-file", "returncode": 1, "timed_out": False},
    ]
    assert event.payload["commands"] == 2
