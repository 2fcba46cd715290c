"""A gate's finding and its review: the `reward_hacking`, `review_flag`, `review_requested` and `review_decision`
event kinds, their payload shapes, and the one rule that turns them into a rollout's review state."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, Field

from alight.schemas.strict import Strict

# The event kind of a hard gate's violation (alight_sandbox.guards); payload: GatePayload.
REWARD_HACKING = "reward_hacking"
REVIEW_FLAG = "review_flag"  # the event kind of a review flag: same payload, the reward unchanged
# A rollout sent to the review queue with no flag (the random audit of what passed every gate); payload:
# ReviewRequest. Written by whoever chose it (the trainer), never by the attempt.
REVIEW_REQUESTED = "review_requested"
# A person's verdict on a queued rollout, under a reviewer (or admin) key; payload: ReviewDecision. One per
# rollout: a decision is final (a second one is refused), so what trained is never un-decided.
REVIEW_DECISION = "review_decision"
MAX_EVIDENCE_CHARS = 2000
ReviewState = Literal["clear", "pending", "accepted", "rejected"]


class GatePayload(Strict):
    """A `reward_hacking` event's payload, the one shape the trainer, `alight eval` and the dashboard read."""

    rule: str = Field(min_length=1, max_length=64, pattern=r"^[a-z][a-z0-9_]*$")  # e.g. test_file_modified
    evidence: str = Field(max_length=MAX_EVIDENCE_CHARS)  # what the sandbox recorded, not the agent's claim


class GateFlag(BaseModel):
    """A gate's finding as the rollout's trajectory carries it (the event keeps the evidence): the trainer's
    filter leaves a `reward_hacking` rollout out without asking for its events."""

    kind: str  # REWARD_HACKING or REVIEW_FLAG
    rule: str
    attempt: int | None = None  # the attempt it was found in; the flag counts for the rollout, every attempt


class ReviewRequest(Strict):
    """A `review_requested` event's payload."""

    reason: Literal["audit"]  # the random audit (`review.audit_share`); flags queue a rollout by themselves


class ReviewDecision(Strict):
    """A `review_decision` event's payload."""

    decision: Literal["accept", "reject"]
    reviewer: str = Field(min_length=1, max_length=128)  # who decided: the key's name, never the key
    note: str = Field(default="", max_length=MAX_EVIDENCE_CHARS)


def review_state(kinds: Iterable[str], decision: str | None = None) -> ReviewState:
    """A rollout's review state from its event kinds and its decision (if any), the one rule the trainer, the
    queue and the dashboard share: queued by a review flag or a review request, out of training while pending,
    then accepted or rejected by a person. A rollout with a hard gate's violation is never queued: it is 0."""
    kinds = set(kinds)
    if REWARD_HACKING in kinds or not kinds & {REVIEW_FLAG, REVIEW_REQUESTED}:
        return "clear"
    if decision is None:
        return "pending"
    return "accepted" if decision == "accept" else "rejected"
