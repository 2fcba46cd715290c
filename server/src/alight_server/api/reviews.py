"""The review queue: flagged (or audited) rollouts wait out of training until a person accepts or rejects them.

What queues a rollout, who decides and why a decision is final: docs/security.md, "The review queue and reviewer
keys"; `review_state` (alight.schemas.gates) is the rule the queue and the decision both apply.
"""

from __future__ import annotations

import logging
from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Path, Query
from pydantic import Field

from alight.evaluation import EPISODE
from alight.schemas import (
    MAX_EVIDENCE_CHARS,
    REVIEW_DECISION,
    REVIEW_FLAG,
    REVIEW_REQUESTED,
    REWARD_HACKING,
    TERMINAL_STATES,
    Event,
    EventCreate,
    ReviewDecision,
    Rollout,
    review_state,
)
from alight.schemas.strict import Strict
from alight_server.http.deps import Caller, ReaderDep, RedactionDep, ReviewerDep, StoreDep
from alight_server.store import Store
from alight_server.store.base import Conflict
from alight_server.trajectories.join import final_reward

router = APIRouter(tags=["reviews"])
log = logging.getLogger("alight.server")

REVIEW_KINDS = (REWARD_HACKING, REVIEW_FLAG, REVIEW_REQUESTED, REVIEW_DECISION)
DECISION_ID = "review-decision"  # the one decision event of a rollout: a fixed id, so two at once cannot both land
RolloutId = Annotated[str, Path(max_length=200)]
QUEUE_HINT = "GET /api/reviews (the dashboard's Review page) lists the rollouts that wait for a decision"


class ReviewVerdict(Strict):
    """The body of a decision: the reviewer is the key that sent it, never a field."""

    decision: Literal["accept", "reject"]
    note: str = Field(default="", max_length=MAX_EVIDENCE_CHARS)


def check_event_kind(caller: Caller, kind: str) -> None:
    """The generic events route carries no decision (only the review route decides, once), and an attempt never
    queues itself for an audit (the trainer chooses those)."""
    if kind == REVIEW_DECISION:
        raise HTTPException(
            403, f"a {REVIEW_DECISION} event is written by POST /api/rollouts/{{id}}/review only (one per rollout)"
        )
    if kind == REVIEW_REQUESTED and caller.attempt is not None:
        raise HTTPException(403, f"an attempt token may not write {REVIEW_REQUESTED}: the trainer's audit chooses")


def _queue_item(store: Store, rollout: Rollout, events: list[Event]) -> dict[str, Any]:
    events = [e for e in events if e.kind in (REVIEW_FLAG, REVIEW_REQUESTED)]  # what queued it
    episodes = store.list_events(rollout.id, kind=EPISODE)
    latest = rollout.attempts[-1].attempt if rollout.attempts else None
    return {
        "rollout_id": rollout.id,
        "state": rollout.state.value,
        "mode": rollout.mode.value,
        "group_id": rollout.group_id,
        "created_at": rollout.created_at.isoformat(),
        "attempts": len(rollout.attempts),
        "final_reward": final_reward(store.list_rewards(rollout.id, attempt=latest)) if latest else None,
        "reasons": sorted({"flag" if e.kind == REVIEW_FLAG else "audit" for e in events}),
        "flags": [{"kind": e.kind, "attempt": e.attempt, **e.payload} for e in events],
        "task": rollout.task,
        # the coding episode's command counts, diff and commands (alight_sandbox.guards.grade), its latest attempt's
        "episode": episodes[-1].payload if episodes else None,
    }


@router.get("/reviews")
def review_queue(
    store: StoreDep,
    caller: ReaderDep,
    redaction: RedactionDep,
    page: Annotated[int, Query(ge=1, le=1_000_000)] = 1,
    per_page: Annotated[int, Query(ge=1, le=200)] = 50,
) -> dict[str, Any]:
    """The rollouts waiting for a decision (oldest first) with their flags' evidence, diff and commands."""
    # The SQL narrows to queued rollouts with no decision and no hard gate; review_state has the last word.
    found, total = store.rollouts_with_events(
        (REVIEW_FLAG, REVIEW_REQUESTED),
        none_of=(REVIEW_DECISION, REWARD_HACKING),
        offset=(page - 1) * per_page,
        limit=per_page,
    )
    listed = [(rollout, store.list_events(rollout.id, kind=REVIEW_KINDS)) for rollout in found]
    items = [_queue_item(store, r, events) for r, events in listed if review_state(e.kind for e in events) == "pending"]
    if redaction is not None:
        items = redaction.redact_json(items)
    return {
        "reviews": items,
        "total": total,
        "page": page,
        "per_page": per_page,
        "can_decide": caller.admin or caller.reviewer is not None,
        "redacted": redaction is not None,
    }


def _refuse_unless_pending(rollout: Rollout, events: list[Event]) -> None:
    """409 naming why this rollout cannot be decided now, and what to do instead."""
    if (decided := next((e for e in events if e.kind == REVIEW_DECISION), None)) is not None:
        by, verdict = decided.payload.get("reviewer"), decided.payload.get("decision")
        raise HTTPException(
            409,
            f"rollout {rollout.id!r} was already decided ({verdict}, by {by}, at {decided.created_at.isoformat()}); "
            "a decision is final, so what trained is never un-decided",
        )
    if gates := [str(e.payload.get("rule")) for e in events if e.kind == REWARD_HACKING]:
        raise HTTPException(
            409,
            f"rollout {rollout.id!r} broke a hard gate ({', '.join(sorted(set(gates)))}): its reward is 0 and it "
            f"never trains, so there is nothing to review; {QUEUE_HINT}",
        )
    if review_state(e.kind for e in events) != "pending":
        raise HTTPException(
            409,
            f"rollout {rollout.id!r} is not in the review queue: it has no {REVIEW_FLAG} and no "
            f"{REVIEW_REQUESTED} event; {QUEUE_HINT}",
        )
    if rollout.state not in TERMINAL_STATES:
        raise HTTPException(409, f"rollout {rollout.id!r} is still {rollout.state.value}; decide it once it has ended")


@router.post("/rollouts/{rollout_id}/review")
def decide_review(rollout_id: RolloutId, body: ReviewVerdict, store: StoreDep, caller: ReviewerDep) -> dict[str, Any]:
    """Accept (it trains in a later step) or reject (it stays out, kept as a security regression) a queued
    rollout. 404 for an unknown rollout; 409 when it is not pending or was already decided."""
    rollout = store.get_rollout(rollout_id)
    events = store.list_events(rollout_id, kind=REVIEW_KINDS)
    _refuse_unless_pending(rollout, events)
    reviewer = caller.reviewer or "admin"
    decision = ReviewDecision(decision=body.decision, reviewer=reviewer, note=body.note[:MAX_EVIDENCE_CHARS])
    try:
        event = EventCreate(id=DECISION_ID, kind=REVIEW_DECISION, payload=decision.model_dump())
        stored = store.add_event(rollout_id, event)
    except Conflict as exc:  # another decision landed between the check and the write
        raise HTTPException(409, f"rollout {rollout_id!r} was decided by someone else just now; reload it") from exc
    log.info("review decided: rollout %s %s by %s", rollout_id, body.decision, reviewer)
    review = review_state([*(e.kind for e in events), REVIEW_DECISION], str(stored.payload["decision"]))
    return {"rollout_id": rollout_id, "review": review, "decided_at": stored.created_at.isoformat(), **stored.payload}
