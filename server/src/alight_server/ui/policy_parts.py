"""A recorded run's trajectories split by policy as its trainer split them, for the export and capture health.

Why (the builder drops a call flagged `policy:<name>`, so whole trajectories would give no rows): docs/data.md,
the export's "several policies"; a run of one policy is one part, as is.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from alight.schemas import Trajectory

NO_NAMED_REWARD = "rollout_no_named_reward"  # calls left out with a rollout lacking its policy's named reward


@dataclass
class RunParts:
    """Each policy's share of the trajectories (policy None: the run has one policy) and what the split left out."""

    parts: list[tuple[str | None, list[Trajectory]]]
    # reason -> calls of no policy (`no_policy`, `unknown_policy`, `several_policies`) and NO_NAMED_REWARD
    dropped_calls: Counter[str] = field(default_factory=Counter[str])
    no_named_reward: dict[str, set[str]] = field(default_factory=dict[str, set[str]])  # policy -> rollouts left out


def split_run(trajectories: Sequence[Trajectory], policies: Mapping[str, str | None]) -> RunParts:
    """The trainer's split of `trajectories` among `policies` (name -> named reward; {} for one policy)."""
    from alight_server.trainer.config.policies import PolicyConfig
    from alight_server.trainer.step.policy_samples import call_policy, split_by_policy

    if not policies:
        return RunParts([(None, list(trajectories))])
    configs = {name: PolicyConfig.model_construct(reward=reward) for name, reward in policies.items()}
    split, metrics = split_by_policy(trajectories, configs)
    prefix = "filter/calls_"
    dropped = Counter({k.removeprefix(prefix): int(n) for k, n in metrics.items() if k.startswith(prefix) and n})
    # A rollout left out of P's share lacks P's named reward (the split keeps every other): its P calls go with it.
    own: Counter[str] = Counter()
    for trajectory in trajectories:
        for tc in trajectory.calls:
            with contextlib.suppress(ValueError):  # a call of several policies is counted above
                own[call_policy(tc.call) or ""] += 1
    no_named: dict[str, set[str]] = {}
    for name in policies:
        if left := own[name] - sum(len(copy.calls) for copy in split[name]):
            dropped[NO_NAMED_REWARD] += left
        if missing := {t.rollout_id for t in trajectories} - {copy.rollout_id for copy in split[name]}:
            no_named[name] = missing
    return RunParts([(name, copies) for name, copies in split.items()], dropped, no_named)
