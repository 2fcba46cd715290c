"""A step's integrity: how many of its rollouts a gate caught or flagged, and which ones the random audit sends
to the review queue (`review.audit_share`). trainer/run/quarantine.py holds the queued ones out of training."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from alight.schemas import REVIEW_FLAG, Trajectory


def review_flagged(trajectory: Trajectory) -> bool:
    """A gate asked a person to look at the rollout (a `review_flag` event): the reward stands, the review decides."""
    return any(flag.kind == REVIEW_FLAG for flag in trajectory.gate_flags)


def audited(rollout_id: str, seed: int, share: float) -> bool:
    """Whether the random audit picks `rollout_id`: a hash of the run's seed and the id, below `share`. The same
    answer every time it is asked (a resumed run picks the same rollouts), independent from one id to the next."""
    if share <= 0:
        return False
    return int.from_bytes(hashlib.sha256(f"{seed}:{rollout_id}".encode()).digest()[:8], "big") / 2**64 < share


def passed_every_gate(trajectory: Trajectory) -> bool:
    """The gates ran on the rollout and none caught or flagged it, and nobody queued it yet: what the audit draws
    from. A rollout no gate looked at (a run without a grader) passed nothing, so it is never audited."""
    return trajectory.gated and not trajectory.gate_flags and trajectory.review == "clear"


def integrity_metrics(trajectories: Sequence[Trajectory]) -> dict[str, float]:
    """`integrity/violation_share` (a hard gate's `reward_hacking`) and `integrity/flag_share` (a review flag)
    over the step's rollouts. A rising violation share is the earliest sign that a policy has found a hole."""
    total = max(len(trajectories), 1)
    return {
        "integrity/violation_share": sum(t.gate_flagged for t in trajectories) / total,
        "integrity/flag_share": sum(review_flagged(t) for t in trajectories) / total,
    }
