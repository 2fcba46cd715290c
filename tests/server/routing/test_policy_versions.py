"""Own versions of several policies within the one global version counter (policy_versions.py)."""

from __future__ import annotations

from datetime import UTC, datetime

from alight.schemas import PolicyVersion
from alight_server.policies.versions import bump_metadata, own_version, updates_between


def _bump(version: int, metadata: dict[str, object] | None = None) -> PolicyVersion:
    return PolicyVersion(version=version, created_at=datetime(2026, 1, 1, tzinfo=UTC), metadata=metadata or {})


# 1: planner alone, 2: every policy (no `policies`), 3: executor alone, 4: planner alone
HISTORY = [
    _bump(1, {"policies": ["planner"], "step": 1}),
    _bump(2, {"step": 2}),
    _bump(3, {"policies": ["executor"]}),
    _bump(4, {"policies": ["planner"]}),
]


def test_a_policy_own_version_counts_the_bumps_that_named_it_or_named_none() -> None:
    assert own_version(HISTORY, "planner") == 3
    assert own_version(HISTORY, "executor") == 2


def test_own_version_up_to_a_global_version_ignores_later_bumps() -> None:
    assert own_version(HISTORY, "planner", upto=2) == 2
    assert own_version(HISTORY, "executor", upto=2) == 1
    assert own_version(HISTORY, "planner", upto=0) == 0


def test_a_policy_never_bumped_on_its_own_counts_only_the_bumps_of_all() -> None:
    assert own_version(HISTORY, "judge") == 1


def test_updates_between_counts_only_the_bumps_that_changed_that_policy() -> None:
    assert updates_between(HISTORY, "planner", 2, 4) == 1  # 3 changed the executor only
    assert updates_between(HISTORY, "executor", 2, 4) == 1
    assert updates_between(HISTORY, "executor", 3, 4) == 0  # the executor is not stale after the planner moved


def test_updates_between_without_policies_metadata_counts_every_bump() -> None:
    history = [_bump(1), _bump(2), _bump(3)]
    assert updates_between(history, "anything", 0, 3) == 3
    assert updates_between(history, "anything", 1, 2) == 1


def test_a_policies_value_that_is_not_a_list_counts_as_every_policy_changed() -> None:
    forged = [_bump(1, {"policies": "planner-and-more"}), _bump(2, {"policies": None})]
    assert own_version(forged, "executor") == 2
    assert own_version(forged, "plan") == 2  # no substring match on a string


def test_bump_metadata_names_the_policy_and_keeps_the_callers_keys() -> None:
    assert bump_metadata({"step": 7, "policies": ["other"]}, "planner") == {"step": 7, "policies": ["planner"]}
