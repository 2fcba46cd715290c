"""Each policy's share of a step's trajectories (several policies): its own calls, scored by its own reward.

A call belongs to the policy its `policy:<name>` flag names; one with no such flag, with two, or naming an
unknown policy trains no policy (counted as `filter/calls_<reason>`). Each policy gets a copy of every
trajectory holding only its calls, flag taken off, so calls of two policies never share a row; a copy without
its calls adds no rows but its reward still counts in its group's statistics. A policy's reward is the final
one or its named reward (`named_reward`); rewards named for a policy are taken off every copy's calls, so an
agent reporting a reward named like another policy's scores that policy alone."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Mapping, Sequence

from alight.schemas import FailureKind, ModelCall, Reward, Trajectory, TrajectoryCall
from alight_server.policies.routing import POLICY_FLAG, policy_of
from alight_server.trainer.config.policies import PolicyConfig
from alight_server.trainer.step.samples.build import SampleConfig, prefix_breaks
from alight_server.trajectories.join import SOURCE_PRECEDENCE

CALL_REASONS = ("no_policy", "unknown_policy", "several_policies")  # why a call belongs to no policy


def call_policy(call: ModelCall) -> str | None:
    """The policy named by the call's `policy:<name>` flag (`routing.policy_of`); None without one; ValueError
    with several, which the gateway never records: such a call trains no policy rather than the first named."""
    named = {flag for flag in call.flags if flag.startswith(POLICY_FLAG)}
    if len(named) > 1:
        raise ValueError(f"call {call.id} is flagged with several policies: {sorted(named)}")
    return policy_of(call.flags)


def named_reward(trajectory: Trajectory, name: str) -> float | None:
    """The trajectory's reward named `name`: the latest one from the highest-precedence source that gave one
    (an evaluator's over the agent's own, as for the final reward); None when nobody reported it."""
    given = [r for r in trajectory.rewards if r.name == name]
    if not given:
        return None
    best = min(SOURCE_PRECEDENCE.index(r.source) for r in given)
    return max((r for r in given if r.source is SOURCE_PRECEDENCE[best]), key=lambda r: r.created_at).value


def with_reward(trajectory: Trajectory, reward_name: str | None) -> Trajectory:
    """The trajectory with its final reward replaced by the named one (None when absent); itself when unnamed."""
    if reward_name is None:
        return trajectory
    return trajectory.model_copy(update={"final_reward": named_reward(trajectory, reward_name)})


def split_by_policy(
    trajectories: Sequence[Trajectory], policies: Mapping[str, PolicyConfig]
) -> tuple[dict[str, list[Trajectory]], dict[str, float]]:
    """(policy name -> its copies of the trajectories, in config order; the counts of what was left out)."""
    role_rewards = {policy.reward for policy in policies.values() if policy.reward is not None}
    split: dict[str, list[Trajectory]] = {name: [] for name in policies}
    dropped_calls: Counter[str] = Counter()
    no_named: Counter[str] = Counter()
    for trajectory in trajectories:
        calls = _calls_by_policy(trajectory, policies, role_rewards, dropped_calls)
        for name, policy in policies.items():
            copy = trajectory.model_copy(update={"calls": calls.get(name, [])})
            if policy.reward is not None and trajectory.failure_kind not in (FailureKind.INFRA, FailureKind.TIMEOUT):
                copy = with_reward(copy, policy.reward)  # an infra failure is the builder's to count, as today
                if copy.final_reward is None:
                    no_named[name] += 1
                    continue
            split[name].append(copy)
    metrics = {f"filter/calls_{reason}": float(dropped_calls[reason]) for reason in CALL_REASONS}
    metrics.update(
        {f"policy/{name}/filter/no_named_reward": float(no_named[name]) for name, p in policies.items() if p.reward}
    )
    return split, metrics


def prefix_breaks_by_policy(trajectory: Trajectory, samples: SampleConfig) -> int:
    """Prefix breaks as the builder will count them: in each policy's own copy, summed (the flags say which
    policies served the attempt); `samples.build.prefix_breaks` itself for an attempt of one policy."""
    names: set[str] = set()
    for tc in trajectory.calls:
        with contextlib.suppress(ValueError):  # a call of several policies trains none, so breaks none
            names.add(call_policy(tc.call) or "")
    names.discard("")
    if not names:
        return prefix_breaks(trajectory, samples)
    split, _ = split_by_policy([trajectory], {name: PolicyConfig() for name in names})
    return sum(prefix_breaks(copy, samples) for copies in split.values() for copy in copies)


def _calls_by_policy(
    trajectory: Trajectory, policies: Mapping[str, PolicyConfig], role_rewards: set[str], dropped: Counter[str]
) -> dict[str, list[TrajectoryCall]]:
    """The trajectory's calls grouped by their policy, each without its policy flag and role rewards."""
    by_policy: dict[str, list[TrajectoryCall]] = {}
    for tc in trajectory.calls:
        try:
            name = call_policy(tc.call)
        except ValueError:
            dropped["several_policies"] += 1
            continue
        if name is None or name not in policies:
            dropped["no_policy" if name is None else "unknown_policy"] += 1
            continue
        flags = [flag for flag in tc.call.flags if not flag.startswith(POLICY_FLAG)]
        rewards: list[Reward] = [r for r in tc.rewards if r.name not in role_rewards]
        call = tc.call.model_copy(update={"flags": flags})
        by_policy.setdefault(name, []).append(tc.model_copy(update={"call": call, "rewards": rewards}))
    return by_policy
