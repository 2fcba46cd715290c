"""A gate's finding: the `reward_hacking` (hard gate) and `review_flag` event kinds and their one payload shape."""

from __future__ import annotations

from pydantic import BaseModel, Field

from alight.schemas.strict import Strict

REWARD_HACKING = (
    "reward_hacking"  # the event kind of a hard gate's violation (alight_sandbox.guards); payload: GatePayload
)
REVIEW_FLAG = "review_flag"  # the event kind of a review flag: same payload, the reward unchanged
MAX_EVIDENCE_CHARS = 2000


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
