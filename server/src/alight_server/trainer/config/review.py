"""The `review:` section: what training does with a rollout a person has to look at (docs/security.md#review-flags)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from alight_server.trainer.config.sections import Section


class ReviewConfig(Section):
    """A rollout is queued for review by a gate's review flag or by the random audit; until a person decides it
    is pending (alight.schemas.gates.review_state). trainer/run/quarantine.py applies this section."""

    # quarantine: a group with a pending rollout is held out of training until every rollout of it is decided,
    #   then trains in a later step with its recorded policy versions (within max_staleness; else dropped, counted);
    #   a rejected rollout never trains and its task joins the run's regression tasks (regressions.jsonl).
    # drop: a queued rollout never trains, whatever is decided; the rest of its group trains at once.
    # train: a queued rollout trains at once, like one nobody queued (people still review it).
    flags: Literal["quarantine", "drop", "train"] = "quarantine"
    # The share of rollouts that passed every gate sent to the queue too (review_requested, reason audit),
    # chosen from the rollout id and the run's seed, so a resumed run picks the same ones. 0: no audit.
    audit_share: float = Field(default=0.02, ge=0.0, le=1.0)
    # How many policy versions a held group may fall behind before it is dropped (counted as
    # integrity/dropped_stale); None: async_rollout.max_staleness, the bound an async group has.
    max_staleness: int | None = Field(default=None, ge=0, le=1000)
