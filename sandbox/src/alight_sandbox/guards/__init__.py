"""Sandboxed coding episodes and their hard gates: bubblewrap workspaces, strace evidence, test-based reward.

    episode = prepare_episode(checkout, session, python=sys.executable, hidden_tests=["tests/test_x.py"])
    # ... the agent's commands run via `python -m alight_sandbox.guards.launch SESSION ...` (or run_command) ...
    grade = grade_episode(episode, checkout, fail_to_pass, pass_to_pass)
    report_grade(grade)   # reward 0 + a reward_hacking event per broken rule, else the tests decide

Standard library only (plus the alight SDK for `report_grade`); needs `bwrap` and `strace` on PATH.
The names below are imported when first used: every command an agent runs starts the launcher, which
needs none of the grading side (the SDK's schemas and evaluation, about 0.15 CPU-s a start).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from alight.evaluation import REWARD_HACKING
    from alight_sandbox.guards.episode import Episode, EpisodeReport, finish_episode, prepare_episode
    from alight_sandbox.guards.grade import Grade, grade_episode, grade_events, report_grade
    from alight_sandbox.guards.policy import SandboxPolicy, require_tools
    from alight_sandbox.guards.rules import RULES, Violation
    from alight_sandbox.guards.run import CommandResult, run_command
    from alight_sandbox.guards.testrun import TestRun, run_tests

_FROM = {
    "alight.evaluation": ["REWARD_HACKING"],
    "alight_sandbox.guards.episode": ["Episode", "EpisodeReport", "finish_episode", "prepare_episode"],
    "alight_sandbox.guards.grade": ["Grade", "grade_episode", "grade_events", "report_grade"],
    "alight_sandbox.guards.policy": ["SandboxPolicy", "require_tools"],
    "alight_sandbox.guards.rules": ["RULES", "Violation"],
    "alight_sandbox.guards.run": ["CommandResult", "run_command"],
    "alight_sandbox.guards.testrun": ["TestRun", "run_tests"],
}
_MODULE = {name: module for module, names in _FROM.items() for name in names}


def __getattr__(name: str) -> Any:
    if name not in _MODULE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_MODULE[name]), name)


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
