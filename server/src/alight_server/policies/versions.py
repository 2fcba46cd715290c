"""A policy's own version within the one global version counter (several policies), derived from its history.

The rule (which bumps changed which policy, what a call's staleness counts): docs/gateway.md "Versions".
"""

from __future__ import annotations

from collections.abc import Iterable

from alight.schemas import PolicyVersion

POLICIES_KEY = "policies"  # in a policy version's metadata: the policies that bump changed


def bump_metadata(metadata: dict[str, object], policy: str) -> dict[str, object]:
    """The metadata a bump of `policy` alone is stored with (the caller's keys kept, `policies` set)."""
    return {**metadata, POLICIES_KEY: [policy]}


def changes(version: PolicyVersion, policy: str) -> bool:
    """Did this bump change `policy`? Every policy, unless its metadata names the ones it changed."""
    names = version.metadata.get(POLICIES_KEY)
    return not isinstance(names, list) or policy in names


def own_version(history: Iterable[PolicyVersion], policy: str, upto: int | None = None) -> int:
    """How many bumps up to global version `upto` (default: all of them) changed `policy`."""
    return sum(1 for v in history if (upto is None or v.version <= upto) and changes(v, policy))


def updates_between(history: Iterable[PolicyVersion], policy: str, after_version: int, upto_version: int) -> int:
    """How many bumps after global version `after_version`, up to `upto_version`, changed `policy`: the
    staleness of a call of that policy served at `after_version` when training at `upto_version`."""
    return sum(1 for v in history if after_version < v.version <= upto_version and changes(v, policy))
