"""The trajectory filter before training: rollouts a gate flagged, with capture problems, or infra failures.

Dropped rollouts stay in the store (a flagged one is a security regression to look at, not data) and are
counted as `filter/<reason>`; gate flags arrive with the trajectory, so the filter asks the server nothing."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from alight.schemas import FailureKind, Trajectory
from alight_server.trainer.step.policy_samples import prefix_breaks_by_policy
from alight_server.trainer.step.samples.build import SampleConfig
from alight_server.trajectories.call_output import call_output

# The capture-problem thresholds are off unless a config sets them: a small policy's calls are often cut at
# max_tokens, and its group would lose the rollouts that carry its signal (the coding example sets 2 and 0.5).
# A prefix break is one the sample builder counts under the run's own sample settings (a retry or a sub-agent's
# interleaved calls is none), in each policy's own calls with several policies (`prefix_breaks_by_policy`).


def truncated_share(trajectory: Trajectory) -> float:
    """The share of the attempt's calls cut at their token limit, in whichever flavour they were recorded."""
    if not trajectory.calls:
        return 0.0
    return sum(call_output(tc.call).finish_reason == "length" for tc in trajectory.calls) / len(trajectory.calls)


def drop_reason(trajectory: Trajectory, samples: SampleConfig) -> str | None:
    """Why the trainer leaves `trajectory` out under the run's sample settings (their thresholds), or None."""
    if trajectory.failure_kind in (FailureKind.INFRA, FailureKind.TIMEOUT):
        return "infra"
    if trajectory.gate_flagged:
        return "gate_flagged"
    limit = samples.max_prefix_breaks
    if limit is not None and prefix_breaks_by_policy(trajectory, samples) > limit:
        return "prefix_breaks"
    if samples.max_truncated_share is not None and truncated_share(trajectory) > samples.max_truncated_share:
        return "truncated"
    return None


def filter_for_training(
    trajectories: Sequence[Trajectory], samples: SampleConfig
) -> tuple[list[Trajectory], dict[str, float]]:
    """(the trajectories to train on, `filter/<reason>` counts for the step metrics)."""
    reasons = [drop_reason(trajectory, samples) for trajectory in trajectories]
    kept = [trajectory for trajectory, reason in zip(trajectories, reasons, strict=True) if reason is None]
    dropped = Counter(reason for reason in reasons if reason is not None)
    metrics = {
        f"filter/{reason}": float(dropped[reason]) for reason in ("gate_flagged", "prefix_breaks", "truncated", "infra")
    }
    return kept, metrics
