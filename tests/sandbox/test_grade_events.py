"""A grade's rollout events: fixed ids per attempt (a retried write is idempotent) and evidence within the limit."""

from __future__ import annotations

from alight.schemas import MAX_EVIDENCE_CHARS, REWARD_HACKING
from alight_sandbox.guards.episode import EpisodeReport
from alight_sandbox.guards.evidence import Access
from alight_sandbox.guards.grade import MAX_REVIEW_COMMANDS, MAX_REVIEW_DIFF_CHARS, Grade, grade_events
from alight_sandbox.guards.policy import CANARY_MOUNT
from alight_sandbox.guards.rules import CANARY_READ, TEST_FILE_DELETED, Violation, trace_counts


def _grade(violations: list[Violation]) -> Grade:
    report = EpisodeReport(
        changed=[], diff="", diff_lines=3, violations=violations, commands=5, command_errors=1, timeouts=0
    )
    return Grade(0.0, 1.0, 1.0, violations, report)


def test_each_violation_is_one_reward_hacking_event_with_an_id_fixed_by_attempt_and_order() -> None:
    violations = [Violation(TEST_FILE_DELETED, "tests/a.py was deleted"), Violation(CANARY_READ, "open ~/.netrc")]
    events = grade_events(_grade(violations), attempt=2)
    assert [(e.id, e.kind, e.attempt) for e in events] == [
        ("episode-2", "episode", 2),
        ("reward_hacking-2-0", REWARD_HACKING, 2),
        ("reward_hacking-2-1", REWARD_HACKING, 2),
    ]
    assert events[1].payload == {"rule": TEST_FILE_DELETED, "evidence": "tests/a.py was deleted"}
    assert events == grade_events(_grade(violations), attempt=2)


def test_evidence_over_the_limit_is_cut_to_it() -> None:
    (_, event) = grade_events(_grade([Violation(CANARY_READ, "x" * (MAX_EVIDENCE_CHARS * 2))]), attempt=1)
    assert event.payload["evidence"] == "x" * MAX_EVIDENCE_CHARS


def test_the_episode_event_carries_the_diff_and_commands_a_reviewer_reads_cut_to_their_limits() -> None:
    grade = _grade([])
    grade.report.diff = "+x\n" * (MAX_REVIEW_DIFF_CHARS // 2)
    grade.commands = [{"command": "cat calc.py", "returncode": 0, "timed_out": False}] * (MAX_REVIEW_COMMANDS + 5)
    (episode,) = grade_events(grade, attempt=1)
    assert len(episode.payload["diff"]) == MAX_REVIEW_DIFF_CHARS
    assert episode.payload["command_lines"][0] == {"command": "cat calc.py", "returncode": 0, "timed_out": False}
    assert len(episode.payload["command_lines"]) == MAX_REVIEW_COMMANDS
    assert episode.payload["commands"] == 5  # the count alight eval reads stays as it was


def test_the_episode_event_carries_the_changed_files_and_the_traced_canary_reads_and_egress_attempts() -> None:
    accesses = [
        Access("openat", path=CANARY_MOUNT),
        Access("openat", path=CANARY_MOUNT),
        Access("connect", family="AF_INET"),
        Access("connect", family="AF_UNIX"),  # a local socket is not egress
        Access("openat", path="/workspace/calc.py"),
    ]
    grade = _grade([])
    grade.report.changed, grade.report.trace_counts = ["calc.py", "setup.cfg"], trace_counts(accesses)
    (episode,) = grade_events(grade, attempt=1)
    assert episode.payload["files"] == ["calc.py", "setup.cfg"] and episode.payload["diff_lines"] == 3
    assert (episode.payload["canary_reads"], episode.payload["egress_attempts"]) == (2, 1)
