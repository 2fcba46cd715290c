"""Sandboxed coding episodes and their hard gates: bubblewrap workspaces, strace evidence, test-based reward.

    episode = prepare_episode(checkout, session, python=sys.executable, hidden_tests=["tests/test_x.py"])
    # ... the agent's commands run via `python -m alight_sandbox.guards.launch SESSION ...` (or run_command) ...
    grade = grade_episode(episode, checkout, fail_to_pass, pass_to_pass)
    report_grade(grade)   # reward 0 + a reward_hacking event per broken rule, else the tests decide

Standard library only (plus the alight SDK for `report_grade`); needs `bwrap` and `strace` on PATH.
"""

from __future__ import annotations

from alight.evaluation import REWARD_HACKING
from alight_sandbox.guards.episode import Episode, EpisodeReport, finish_episode, prepare_episode
from alight_sandbox.guards.grade import Grade, grade_episode, grade_events, report_grade
from alight_sandbox.guards.policy import SandboxPolicy, require_tools
from alight_sandbox.guards.rules import RULES, Violation
from alight_sandbox.guards.run import CommandResult, run_command
from alight_sandbox.guards.testrun import TestRun, run_tests

__all__ = [
    "REWARD_HACKING",
    "RULES",
    "CommandResult",
    "Episode",
    "EpisodeReport",
    "Grade",
    "SandboxPolicy",
    "TestRun",
    "Violation",
    "finish_episode",
    "grade_episode",
    "grade_events",
    "prepare_episode",
    "report_grade",
    "require_tools",
    "run_command",
    "run_tests",
]
